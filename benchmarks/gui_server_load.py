"""Is the window's own chat still usable while API clients stream from the same model?

    python benchmarks/gui_server_load.py MODEL [--clients 16] [--tokens 256] [--json OUT]
        [--screenshot PNG]

The real main window, its engine worker and its Server page (the API server on a thread of the
window's process, sharing the window's engine client, as a user runs it). The model is loaded
with room for the clients plus the window's chat (`--clients + 1` parallel sequences). Then:

1. a reply in the window with no client running (the baseline);
2. `--clients` streaming completions through the Server page's API (raw HTTP on a thread of
   their own, each prompt different, greedy, `ignore_eos`, long enough to outlast step 3);
3. once every client has its first token, the same reply in the window again.

For both window replies it reports the time from pressing send to the first text in the chat
view, the rate at which text reached the view (see gui_decode.py), and how responsive the GUI
thread stayed: a 10 ms timer runs throughout and the longest gap between its ticks is the
longest time the window could not react to a click or a key. For the clients: their aggregate
tok/s over the window's reply, and their time to first token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.common.engine_bridge import EngineBridge  # noqa: E402
from app.shell.main_window import MainWindow  # noqa: E402
from app.shell.pages import SERVER  # noqa: E402
from benchmarks.gui_decode import (  # noqa: E402
    LOAD_TIMEOUT_S,
    REPLY_TIMEOUT_S,
    EosIgnoringClient,
    GuiBenchFailed,
    GuiDecodeConfig,
    _TextProbe,
    _wait,
    cpu_name,
    load_and_warm_up,
)
from benchmarks.server_concurrency import (  # noqa: E402
    free_port,
    percentile,
    prompt_for,
    stream_one,
)
from engine.runtime import protocol as p  # noqa: E402

TICK_MS = 10
REPLY_JOIN_S = 1800.0


class _TickGaps:
    """The longest gaps between ticks of a 10 ms timer on the GUI thread."""

    def __init__(self) -> None:
        self._timer = QTimer()
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        self._last = 0.0

    def start(self) -> None:
        self.gaps = []
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> dict:
        self._timer.stop()
        gaps = sorted(self.gaps) or [0.0]
        return {
            "max_ms": gaps[-1] * 1000,
            "p99_ms": percentile(gaps, 99) * 1000,
            "ticks": len(self.gaps),
        }

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self._last)
        self._last = now


class _Clients:
    """N streaming completions against the window's server, on a thread with its own loop."""

    def __init__(self, port: int, clients: int, tokens: int) -> None:
        self.port, self.clients, self.tokens = port, clients, tokens
        self.first_tokens = 0
        self.results: list = []
        self.error: BaseException | None = None
        self.started = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise GuiBenchFailed(f"the API clients did not finish within {timeout:.0f} s")
        if self.error is not None:
            raise GuiBenchFailed(f"the API clients failed: {self.error}")

    def _run(self) -> None:
        try:
            asyncio.run(self._all())
        except BaseException as exc:  # reported by join, on the GUI thread
            self.error = exc

    async def _all(self) -> None:
        self.started = time.perf_counter()
        bodies = [
            {
                "prompt": prompt_for(i, 48, run=7),
                "max_tokens": self.tokens,
                "temperature": 0,
                "stream": True,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
            }
            for i in range(self.clients)
        ]

        self.results = await asyncio.gather(
            *(stream_one(self.port, b, self.started, self._first) for b in bodies)
        )

    def _first(self) -> None:
        self.first_tokens += 1  # only this thread writes it; the GUI thread reads it


def _window_reply(chat, bridge, config: GuiDecodeConfig, probe: _TextProbe, ticks) -> dict:
    """One reply in the window, as a user sends it; only its own request's text is counted
    (the bridge also carries the API requests' tokens: they share the engine client)."""
    chat.new_chat()
    QApplication.processEvents()
    probe.reset()
    ticks.start()
    chat.max_tokens = config.tokens
    chat.input.setPlainText(config.prompt)
    sent = time.perf_counter()
    chat.send()
    request = chat.request_id
    if request is None:
        raise GuiBenchFailed(f"the chat did not start a reply: {chat.model.entries()[-1].footer}")
    failures = [bridge.generation_failed, bridge.command_failed, bridge.engine_crashed]
    done = None
    while done is None or done.request_id != request:
        done = _wait([bridge.generation_done], failures, REPLY_TIMEOUT_S, "reply")
    responsiveness = ticks.stop()
    ours = [(at, n) for at, n, rid in probe.updates if rid == request]
    (first_at, first_pieces), (last_at, _) = ours[0], ours[-1]
    pieces = sum(n for _, n in ours)
    span = last_at - first_at
    return {
        "first_text_s": first_at - sent,
        "gui_tok_s": (pieces - first_pieces) / span if span > 0 else 0.0,
        "worker_tok_s": done.stats.decode_tokens_per_second,
        "tokens": done.stats.n_generated,
        "reply_s": last_at - sent,
        "gui_thread_longest_gap_ms": responsiveness["max_ms"],
        "gui_thread_p99_gap_ms": responsiveness["p99_ms"],
    }


class _RequestProbe(_TextProbe):
    """gui_decode's probe, keeping which request each text update belongs to."""

    def __call__(self, request_id: int, text: str, n_pieces: int) -> None:
        self.updates.append((time.perf_counter(), n_pieces, request_id))
        self.text.append(text)


def run(config: GuiDecodeConfig, clients: int, client_tokens: int, per_seq_ctx: int) -> dict:
    bridge = EngineBridge(client_factory=EosIgnoringClient)
    window = MainWindow(bridge)
    window.resize(*config.window_size)
    window.show()
    chat = window.chat_view
    probe = _RequestProbe()
    bridge.token_text.connect(probe)
    ticks = _TickGaps()
    slots = clients + 1
    try:
        loaded = load_and_warm_up(
            window,
            config,
            p.ModelParams(
                path=config.model,
                n_ctx=per_seq_ctx * slots,
                n_parallel=slots,
                n_gpu_layers=config.gpu_layers,
                flash_attn=config.flash_attn,
            ),
        )
        alone = _window_reply(chat, bridge, config, probe, ticks)

        page = window.page(SERVER)
        page.port_box.setValue(free_port())
        if not page.start():
            raise GuiBenchFailed(f"the Server page did not start: {page.status_label.text()}")
        load = _Clients(page.port_box.value(), clients, client_tokens)
        load.start()
        # Wait until every client streams: the window's reply then meets the full load.
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while load.first_tokens < clients:
            if load.error is not None or time.monotonic() > deadline:
                load.join(1.0)
                raise GuiBenchFailed(f"only {load.first_tokens} of {clients} clients streamed")
            QApplication.processEvents()
            time.sleep(0.005)
        busy = _window_reply(chat, bridge, config, probe, ticks)
        window.show_page(SERVER)
        load.join(REPLY_JOIN_S)
        for _ in range(20):  # the request log's rows arrive through queued signals
            QApplication.processEvents()
            time.sleep(0.01)
        if config.screenshot:
            window.grab().save(config.screenshot)
        page.stop()
        tokens = sum(r.tokens for r in load.results)
        wall = max(r.ended_s for r in load.results)
        return {
            "model": config.model,
            "devices": list(loaded.runs_on),
            "gpu_layers": f"{loaded.n_gpu_layers}/{loaded.n_layers}",
            "cpu": cpu_name(),
            "clients": clients,
            "client_tokens": client_tokens,
            "window_tokens": config.tokens,
            "window_alone": alone,
            "window_with_clients": busy,
            "clients_aggregate_tok_s": tokens / wall if wall else 0.0,
            "clients_ttft_p50_s": percentile([r.ttft_s for r in load.results], 50),
            "clients_ttft_p95_s": percentile([r.ttft_s for r in load.results], 95),
            "request_log_rows": page.log_table.rowCount(),
        }
    finally:
        bridge.token_text.disconnect(probe)
        bridge.shutdown()
        window.close()
        window.deleteLater()


def format_report(r: dict) -> str:
    a, b = r["window_alone"], r["window_with_clients"]
    lines = [
        f"model: {r['model']}",
        f"runs on: {', '.join(r['devices'])} ({r['gpu_layers']} layers on the GPU); cpu {r['cpu']}",
        f"window reply: {r['window_tokens']} tokens; {r['clients']} API clients x "
        f"{r['client_tokens']} tokens",
        "",
        "| window chat | first text (s) | text rate in the view (tok/s) | worker tok/s | "
        "longest GUI-thread stall (ms) | p99 stall (ms) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, x in (("alone", a), (f"with {r['clients']} API clients", b)):
        lines.append(
            f"| {name} | {x['first_text_s']:.3f} | {x['gui_tok_s']:.1f} | "
            f"{x['worker_tok_s']:.1f} | {x['gui_thread_longest_gap_ms']:.0f} | "
            f"{x['gui_thread_p99_gap_ms']:.0f} |"
        )
    lines += [
        "",
        f"API clients: aggregate {r['clients_aggregate_tok_s']:.1f} tok/s, TTFT p50 "
        f"{r['clients_ttft_p50_s'] * 1000:.0f} ms, p95 {r['clients_ttft_p95_s'] * 1000:.0f} ms; "
        f"{r['request_log_rows']} rows in the Server page's request log",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="GGUF file")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=256, help="tokens of the window's reply")
    parser.add_argument(
        "--client-tokens", type=int, default=0, help="tokens per client (default: 3 x --tokens)"
    )
    parser.add_argument("--ctx", type=int, default=0, help="context per sequence")
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--screenshot", metavar="PNG", help="the Server page at the end")
    args = parser.parse_args(argv)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
    data = tempfile.TemporaryDirectory(prefix="hearth-gui-server-bench-")
    os.environ["HEARTH_DATA_DIR"] = data.name
    client_tokens = args.client_tokens or 3 * args.tokens
    per_seq = args.ctx or -(-(client_tokens + 256) // 256) * 256
    config = GuiDecodeConfig(
        model=args.model,
        tokens=args.tokens,
        gpu_layers=args.gpu_layers,
        screenshot=args.screenshot,
        window_size=(1200, 800),
    )
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("Hearth")
    from app.common.theme import apply_theme

    apply_theme(app)
    try:
        report = run(config, args.clients, client_tokens, per_seq)
    except GuiBenchFailed as exc:
        print(f"The benchmark could not run: {exc}", file=sys.stderr)
        return 1
    finally:
        data.cleanup()
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
