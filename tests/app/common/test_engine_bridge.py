"""The bridge: events from the reader thread reach the GUI thread, coalesced to ~30 flushes/s."""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QThread

from app.common.engine_bridge import FLUSH_INTERVAL_MS
from engine.enums import EngineState
from engine.runtime import protocol as p
from tests.app.conftest import WAIT_MS, client_of, load_fake_model
from tests.app.fake_engine import done, model_loaded

N_TOKENS = 2_000


def _collect_text(bridge):
    received: list[tuple[int, str, int]] = []
    bridge.token_text.connect(lambda rid, text, n: received.append((rid, text, n)))
    return received


def _push_tokens(client, request_id: int, n: int, *, every: int = 0, pause: float = 0.0):
    for i in range(n):
        client.emit(p.TokenText(request_id=request_id, text=f"t{i} "))
        if every and i % every == every - 1:
            time.sleep(pause)


def test_a_burst_of_2000_tokens_is_coalesced_into_a_few_flushes(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    received = _collect_text(bridge)
    finished = []
    bridge.generation_done.connect(finished.append)
    flushes_before = bridge.flush_count

    started = time.monotonic()
    reader = threading.Thread(
        target=lambda: (_push_tokens(client, request_id, N_TOKENS), client.emit(done(request_id)))
    )
    reader.start()
    qtbot.waitUntil(lambda: bool(finished), timeout=WAIT_MS)
    elapsed = time.monotonic() - started
    reader.join()

    text = "".join(t for _, t, _ in received)
    assert text == "".join(f"t{i} " for i in range(N_TOKENS))
    assert sum(n for _, _, n in received) == N_TOKENS
    flushes = bridge.flush_count - flushes_before
    assert flushes == len(received)
    # One flush per 33 ms interval at most (plus the first, which is immediate).
    assert flushes <= 1 + elapsed / (FLUSH_INTERVAL_MS / 1000) + 1
    assert flushes < 20, f"{flushes} flushes for a burst that took {elapsed:.2f} s"
    assert bridge.state == EngineState.IDLE


def test_a_steady_fast_stream_flushes_about_30_times_a_second(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    received = _collect_text(bridge)
    finished = []
    bridge.generation_done.connect(finished.append)

    # 2,000 tokens over about a second: ~2,000 tok/s, far above the repaint rate.
    started = time.monotonic()
    reader = threading.Thread(
        target=lambda: (
            _push_tokens(client, request_id, N_TOKENS, every=20, pause=0.01),
            client.emit(done(request_id)),
        )
    )
    reader.start()
    qtbot.waitUntil(lambda: bool(finished), timeout=WAIT_MS * 3)
    elapsed = time.monotonic() - started
    reader.join()

    assert "".join(t for _, t, _ in received) == "".join(f"t{i} " for i in range(N_TOKENS))
    assert len(received) <= 2 + elapsed / (FLUSH_INTERVAL_MS / 1000)
    # ...and it streams while decoding, rather than holding the text to the end.
    assert len(received) >= 5


def test_the_reader_thread_never_waits_for_a_busy_gui_thread(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    received = _collect_text(bridge)
    pushed = threading.Event()
    reader = threading.Thread(
        target=lambda: (_push_tokens(client, request_id, N_TOKENS), pushed.set())
    )
    reader.start()
    # The GUI thread is busy (not running its event loop) for a whole second...
    time.sleep(1.0)
    # ...and the reader still got rid of every token long before that second was over.
    assert pushed.is_set()
    assert received == []
    qtbot.waitUntil(lambda: sum(n for _, _, n in received) == N_TOKENS, timeout=WAIT_MS)
    reader.join()


def test_signals_fire_on_the_gui_thread(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    threads = []
    bridge.token_text.connect(lambda *_: threads.append(QThread.currentThread()))
    bridge.generation_done.connect(lambda *_: threads.append(QThread.currentThread()))
    reader = threading.Thread(
        target=lambda: (
            client.emit(p.TokenText(request_id=request_id, text="x")),
            client.emit(done(request_id, n_generated=1)),
        )
    )
    reader.start()
    reader.join()
    qtbot.waitUntil(lambda: len(threads) == 2, timeout=WAIT_MS)
    assert all(t is bridge.thread() for t in threads)


def test_text_is_flushed_before_the_event_that_follows_it(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "m.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    order = []
    bridge.token_text.connect(lambda _rid, text, _n: order.append(("text", text)))
    bridge.generation_done.connect(lambda d: order.append(("done", d.stop_reason)))
    for piece in ("Hel", "lo"):
        client.emit(p.TokenText(request_id=request_id, text=piece))
    client.emit(done(request_id, n_generated=2))
    qtbot.waitUntil(lambda: len(order) == 2, timeout=WAIT_MS)
    assert order == [("text", "Hello"), ("done", "eos")]


def test_states_follow_the_engine(qtbot, bridge, tmp_path):
    states = []
    bridge.state_changed.connect(states.append)
    bridge.start()
    assert bridge.state == EngineState.STARTING
    client = client_of(bridge)
    client.emit(p.Ready(pid=1, llama_system_info="CPU", gpu_offload_supported=False))
    qtbot.waitUntil(lambda: bridge.state == EngineState.NO_MODEL, timeout=WAIT_MS)
    assert bridge.generate([p.ChatMessage(role="user", content="hi")]) is None

    bridge.load(p.ModelParams(path=str(tmp_path / "a.gguf")))
    assert bridge.state == EngineState.LOADING
    client.emit_loaded(str(tmp_path / "a.gguf"))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    assert bridge.model.path == str(tmp_path / "a.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    assert bridge.state == EngineState.GENERATING
    client.emit(done(request_id))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    S = EngineState
    assert states == [S.STARTING, S.NO_MODEL, S.LOADING, S.IDLE, S.GENERATING, S.IDLE]


def test_loading_a_second_model_unloads_the_first(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "a.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    client.commands.clear()
    bridge.load(p.ModelParams(path=str(tmp_path / "b.gguf")))
    assert client.names() == ["stop", "unload", "load"]
    assert client.commands[-1][1].path == str(tmp_path / "b.gguf")
    assert bridge.model is None
    # The old reply's end and a late report of the old model are not taken for the new one.
    client.emit(done(request_id, stop_reason="stopped"))
    client.emit(model_loaded(str(tmp_path / "a.gguf")))
    qtbot.wait(3 * FLUSH_INTERVAL_MS)
    assert bridge.state == EngineState.LOADING
    client.emit_loaded(str(tmp_path / "b.gguf"))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)
    assert bridge.model.path == str(tmp_path / "b.gguf")


def test_a_crash_while_loading_reloads_the_last_good_model(qtbot, bridge, tmp_path):
    crashes = []
    bridge.engine_crashed.connect(crashes.append)
    client = load_fake_model(qtbot, bridge, tmp_path / "good.gguf")
    bridge.load(p.ModelParams(path=str(tmp_path / "hostile.gguf")))
    client.crash(lines=("Segmentation fault",))
    qtbot.waitUntil(lambda: bool(crashes), timeout=WAIT_MS)
    assert bridge.state == EngineState.CRASHED
    assert bridge.model is None
    assert bridge.crashed_while_loading.path == str(tmp_path / "hostile.gguf")
    assert crashes[0].last_lines == ("Segmentation fault",)

    assert bridge.reload() is True
    new_client = client_of(bridge)
    assert new_client is not client and new_client.alive
    assert new_client.commands == [("load", p.ModelParams(path=str(tmp_path / "good.gguf")))]


def test_events_of_a_replaced_client_are_dropped(qtbot, bridge, tmp_path):
    old = load_fake_model(qtbot, bridge, tmp_path / "a.gguf")
    old.crash()
    qtbot.waitUntil(lambda: bridge.state == EngineState.CRASHED, timeout=WAIT_MS)
    bridge.set_worker_env({"X": "1"})
    bridge.reload()
    new = client_of(bridge)
    assert new.env == {"X": "1"}
    old.emit(model_loaded(str(tmp_path / "a.gguf")))  # a straggler from the dead process
    qtbot.wait(3 * FLUSH_INTERVAL_MS)
    assert bridge.state == EngineState.LOADING
    new.emit_loaded(str(tmp_path / "a.gguf"))
    qtbot.waitUntil(lambda: bridge.state == EngineState.IDLE, timeout=WAIT_MS)


def test_commands_to_a_dead_worker_do_not_raise(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "a.gguf")
    client.alive = False  # died; its EngineCrashed has not been read yet
    assert bridge.generate([p.ChatMessage(role="user", content="hi")]) is None
    bridge.stop()
    bridge.unload()
    bridge.request_status()


def test_nothing_is_emitted_after_shutdown(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "a.gguf")
    crashes = []
    bridge.engine_crashed.connect(crashes.append)
    bridge.shutdown()
    assert ("close", None) in client.commands
    client.crash()
    qtbot.wait(3 * FLUSH_INTERVAL_MS)
    assert crashes == []


def test_unload_mid_reply_stops_frees_and_ignores_the_late_end(qtbot, bridge, tmp_path):
    client = load_fake_model(qtbot, bridge, tmp_path / "a.gguf")
    request_id = bridge.generate([p.ChatMessage(role="user", content="hi")])
    client.commands.clear()
    bridge.unload()
    assert client.names() == ["stop", "unload"]
    assert bridge.state == EngineState.NO_MODEL and bridge.model is None
    client.emit(done(request_id, stop_reason="stopped"))
    qtbot.wait(3 * FLUSH_INTERVAL_MS)
    assert bridge.state == EngineState.NO_MODEL
    assert bridge.generate([p.ChatMessage(role="user", content="hi")]) is None
