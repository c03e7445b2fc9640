"""The engine worker process with real llama.cpp and the starter model."""

import os
import time
from pathlib import Path

import psutil
import pytest

from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed

from .conftest import GREEDY, RunningEngine

STORY = "Once upon a time, in a small village by the sea,"


def test_greedy_output_is_identical_across_two_runs(loaded_engine):
    first, done1 = loaded_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=48)
    second, done2 = loaded_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=48)
    assert isinstance(done1, p.GenerationDone) and isinstance(done2, p.GenerationDone)
    assert done1.stats.n_generated == 48
    assert "".join(first) == "".join(second)
    assert len("".join(first)) > 40


def test_each_reply_carries_its_speed_of_light_on_the_cpu(loaded_engine):
    _, done = loaded_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=4)
    # the host's copy rate, measured by the worker at the load: ~100 MB of weights read a step
    assert 0 < done.stats.bound_tokens_per_second < 100_000


def test_the_same_prompt_reuses_the_kv_cache(loaded_engine):
    loaded_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=4)
    _, done = loaded_engine.run(prompt=STORY + " there lived", sampling=GREEDY, max_tokens=4)
    stats = done.stats
    assert 0 < stats.n_prompt_tokens_reused < stats.n_prompt_tokens


def test_stop_ends_a_stream_midway(loaded_engine):
    client, events = loaded_engine.client, loaded_engine.events
    request_id = client.generate(prompt=STORY, sampling=GREEDY, max_tokens=2000)
    received = 0
    while received < 5:
        event = events.get(timeout=60)
        if isinstance(event, p.TokenText):
            received += event.n_tokens
    client.stop()
    while True:
        event = events.get(timeout=60)
        if isinstance(event, p.GenerationDone):
            break
    assert event.request_id == request_id
    assert event.stop_reason == "stopped"
    assert 5 <= event.stats.n_generated < 200


def test_stop_strings_end_the_reply_and_are_not_shown(loaded_engine):
    full, _ = loaded_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=40)
    text = "".join(full)
    stop = text[20:26]
    assert stop.strip()
    cut, done = loaded_engine.run(prompt=STORY, sampling=GREEDY, max_tokens=40, stop=(stop,))
    assert done.stop_reason == "stop_string"
    assert "".join(cut) == text[: text.find(stop)]


def test_a_character_split_across_tokens_decodes_right(loaded_engine):
    # The model repeats the pattern; in its byte-level vocabulary these characters take
    # more than one token each, and a token alone is not valid UTF-8.
    prompt = "🦙 🦙 🦙 🦙 🦙 🦙 🦙 🦙"
    texts, done = loaded_engine.run(prompt=prompt, sampling=GREEDY, max_tokens=12)
    assert isinstance(done, p.GenerationDone)
    out = "".join(texts)
    assert "🦙" in out
    assert "\ufffd" not in out
    assert done.stats.n_generated > out.count("🦙") + out.count(" ")


def test_generating_without_a_model_fails_with_a_message(engine):
    _, failed = engine.run(prompt="hi", max_tokens=3)
    assert isinstance(failed, p.GenerationFailed)
    assert "No model is loaded" in failed.message


def test_a_file_llama_cpp_cannot_load_is_refused_and_the_worker_lives_on(engine, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(200))
    failed = engine.load(str(bad))
    assert isinstance(failed, p.LoadFailed)
    assert "could not load bad.gguf" in failed.message
    assert engine.client.alive


def test_loading_a_second_model_returns_the_first_ones_memory(engine, starter_path):
    worker = psutil.Process(engine.client.pid)
    rss = []
    for i in range(4):
        # Another placement each time, so the weights are loaded anew, not kept.
        layers = (-1, 0)[i % 2]
        loaded = engine.load(starter_path, n_ctx=2048, use_mmap=False, n_gpu_layers=layers)
        assert isinstance(loaded, p.ModelLoaded) and not loaded.weights_kept
        _, done = engine.run(prompt="Hi", sampling=GREEDY, max_tokens=2)
        assert isinstance(done, p.GenerationDone)
        rss.append(worker.memory_info().rss)
    # Without mmap the weights (about 97 MB) live in the process: four loads that never freed
    # would hold about 390 MB. Allow for allocator slack, far below one extra model.
    assert rss[-1] - rss[0] < 40 * 1024 * 1024, rss


def test_an_abort_inside_the_worker_is_reported_with_its_last_lines(starter_path):
    running = RunningEngine(env={**os.environ, "HEARTH_WORKER_FAULT": "abort_after_tokens=5"})
    try:
        assert isinstance(running.load(starter_path, n_ctx=1024), p.ModelLoaded)
        texts, crashed = running.run(prompt=STORY, sampling=GREEDY, max_tokens=100)
        assert isinstance(crashed, EngineCrashed)
        assert len(texts) >= 1
        assert crashed.exit_code is not None and crashed.exit_code != 0
        assert "SIGABRT" in crashed.message
        assert any("aborting mid-generation" in line for line in crashed.last_lines)
        assert not running.client.alive
        # a request after the crash says how the engine ended and what it last printed
        with pytest.raises(BrokenPipeError, match=r"exited \(code -6\): .*aborting mid-gen"):
            running.load(starter_path, n_ctx=1024)
    finally:
        running.close()


def test_status_answers_while_generating(loaded_engine):
    client, events = loaded_engine.client, loaded_engine.events
    client.generate(prompt=STORY, sampling=GREEDY, max_tokens=300)
    status = None
    deadline = time.monotonic() + 60
    asked = False
    while time.monotonic() < deadline:
        event = events.get(timeout=60)
        if isinstance(event, p.TokenText) and not asked:
            client.request_status()
            asked = True
        elif isinstance(event, p.Status):
            status = event
            client.stop()
        elif isinstance(event, p.GenerationDone):
            break
    assert status is not None and status.state == "generating"
    assert status.n_tokens_cached > 0


def test_memory_report_counts_the_model(loaded_engine, starter_path):
    loaded_engine.client.request_memory_report()
    report = loaded_engine.events.wait_for(p.MemoryReport, timeout=30)
    assert isinstance(report, p.MemoryReport)
    assert report.model_bytes > 50_000_000
    assert report.process_rss_bytes > 0


def test_close_ends_the_worker_without_a_crash_report(starter_path):
    running = RunningEngine()
    pid = running.client.pid
    running.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(TimeoutError):
        running.events.wait_for(EngineCrashed, timeout=1.0)


@pytest.mark.parametrize("sampling", [GREEDY, p.SamplingParams(seed=42)], ids=["greedy", "seeded"])
def test_sampling_inside_the_graph_picks_the_same_tokens_as_on_the_cpu(starter_path, sampling):
    texts = []
    for on_backend in (False, True):
        running = RunningEngine()
        try:
            loaded = running.load(starter_path, n_ctx=1024, backend_sampling=on_backend)
            assert isinstance(loaded, p.ModelLoaded)
            out, done = running.run(prompt=STORY, sampling=sampling, max_tokens=40)
            assert isinstance(done, p.GenerationDone) and done.stats.n_generated == 40
            texts.append("".join(out))
        finally:
            running.close()
    assert texts[0] == texts[1]


def test_a_chat_is_rendered_with_the_models_template_and_the_next_turn_reuses_the_cache(
    loaded_engine,
):
    history = [p.ChatMessage(role="user", content="What is 2+2?")]
    first, done = loaded_engine.run(messages=history, sampling=GREEDY, max_tokens=40)
    assert isinstance(done, p.GenerationDone), done
    assert "4" in "".join(first)
    assert "<|im_end|>" not in "".join(first)  # the end-of-turn token ends it, unseen
    history += [
        p.ChatMessage(role="assistant", content="".join(first)),
        p.ChatMessage(role="user", content="And 3+3?"),
    ]
    _, done2 = loaded_engine.run(messages=history, sampling=GREEDY, max_tokens=20)
    assert done2.stats.n_prompt_tokens_reused >= done.stats.n_prompt_tokens


def test_a_fixed_seed_draws_the_same_reply_again(loaded_engine):
    seeded = p.SamplingParams(temperature=1.0, seed=7)
    first, _ = loaded_engine.run(prompt=STORY, sampling=seeded, max_tokens=30)
    second, _ = loaded_engine.run(prompt=STORY, sampling=seeded, max_tokens=30)
    reseeded = p.SamplingParams(temperature=1.0, seed=8)
    other, _ = loaded_engine.run(prompt=STORY, sampling=reseeded, max_tokens=30)
    assert "".join(first) == "".join(second)
    assert "".join(other) != "".join(first)


def test_new_context_settings_keep_the_loaded_weights(engine, starter_path, tmp_path):
    first = engine.load(starter_path, n_ctx=2048)
    assert isinstance(first, p.ModelLoaded) and not first.weights_kept
    second = engine.load(starter_path, n_ctx=1024, type_k="q8_0", type_v="q8_0")
    assert isinstance(second, p.ModelLoaded) and second.weights_kept
    assert second.n_ctx == 1024
    # The report still covers the whole model: its buffers and where it runs.
    model_bytes = sum(a.bytes for a in second.allocations if a.kind == "model")
    assert abs(model_bytes - second.size_bytes) < 2 * 1024 * 1024
    kv = sum(a.bytes for a in second.allocations if a.kind == "KV")
    # q8_0: 34 bytes per 32 values, K and V; llama.cpp logs MiB with two decimals.
    assert abs(kv - 30 * 3 * (2 * 34 * 64 // 32) * 1024) <= 0.005 * 1024 * 1024
    _, done = engine.run(prompt=STORY, sampling=GREEDY, max_tokens=8)
    assert isinstance(done, p.GenerationDone) and done.stats.n_generated == 8
    assert done.stats.n_prompt_tokens_reused == 0  # a new context holds nothing

    # Another placement, or the same path holding another file, loads the weights anew.
    third = engine.load(starter_path, n_ctx=1024, cpu_tensors=(r"blk\.0\.ffn_up\.weight",))
    assert isinstance(third, p.ModelLoaded) and not third.weights_kept
    copy = tmp_path / "model.gguf"
    copy.write_bytes(Path(starter_path).read_bytes())
    assert engine.load(str(copy), n_ctx=1024).weights_kept is False
    copy.write_bytes(Path(starter_path).read_bytes())
    os.utime(copy, ns=(1, 1))
    reloaded = engine.load(str(copy), n_ctx=1024)
    assert isinstance(reloaded, p.ModelLoaded) and not reloaded.weights_kept


def test_the_load_reports_what_llama_cpp_allocated(engine, starter_path):
    loaded = engine.load(starter_path, n_ctx=2048, backend_sampling=True)
    assert isinstance(loaded, p.ModelLoaded)
    kv = [a for a in loaded.allocations if a.kind == "KV"]
    # SmolLM2-135M: 30 layers x 3 KV heads x 64 values x (K + V) x 2 bytes (f16) per token.
    assert sum(a.bytes for a in kv) == 30 * 3 * 64 * 2 * 2 * 2048
    kinds = {a.kind for a in loaded.allocations}
    assert {"model", "KV", "compute"} <= kinds
    model_bytes = sum(a.bytes for a in loaded.allocations if a.kind == "model")
    assert abs(model_bytes - loaded.size_bytes) < 2 * 1024 * 1024
    # Debug lines (one per token with sampling in the graph) are dropped, not passed on to the
    # GUI's crash report.
    _, done = engine.run(prompt=STORY, sampling=GREEDY, max_tokens=8)
    assert isinstance(done, p.GenerationDone)
    assert not any("Backend sampler selected" in line for line in engine.client.last_lines())


def test_tensors_named_for_ram_are_placed_there(engine, starter_path):
    loaded = engine.load(starter_path, n_ctx=1024, cpu_tensors=(r"blk\.0\.ffn_up\.weight",))
    assert isinstance(loaded, p.ModelLoaded)
    assert loaded.tensors_in_ram == ("blk.0.ffn_up.weight",)
    _, done = engine.run(prompt=STORY, sampling=GREEDY, max_tokens=4)
    assert isinstance(done, p.GenerationDone)


@pytest.mark.parametrize("asked", ["auto", "on", "off"])
def test_the_load_says_where_the_model_runs_and_whether_flash_attention_is_on(
    engine, starter_path, asked
):
    loaded = engine.load(starter_path, n_ctx=1024, flash_attn=asked)
    assert isinstance(loaded, p.ModelLoaded)
    assert loaded.runs_on == ("CPU",)  # the CPU build
    # the gauge's divisor: the host's copy rate, measured, said to be measured
    assert loaded.bandwidth_gbps > 0 and loaded.bandwidth_source == "measured copy rate"
    # "auto" is settled by llama.cpp: its CPU backend supports flash attention.
    assert loaded.flash_attn == {"auto": "on"}.get(asked, asked)


def test_a_cpu_build_reports_no_layers_on_the_gpu(engine, starter_path):
    loaded = engine.load(starter_path, n_ctx=1024, n_gpu_layers=-1)
    assert (loaded.n_gpu_layers, loaded.n_layers) == (0, 30)


def test_a_request_stopped_while_it_waited_ends_without_generating(loaded_engine):
    client, events = loaded_engine.client, loaded_engine.events
    first = client.generate(prompt=STORY, sampling=GREEDY, max_tokens=16, ignore_eos=True)
    second = client.generate(prompt=STORY, sampling=GREEDY, max_tokens=16, ignore_eos=True)
    client.stop(second)  # the first is running: the second has not begun
    ends = {}
    while len(ends) < 2:
        event = events.get(timeout=60)
        if isinstance(event, p.GenerationDone | p.GenerationFailed):
            ends[event.request_id] = event
    assert ends[first].stats.n_generated == 16
    assert ends[second].stop_reason == "stopped" and ends[second].stats.n_generated == 0


def test_a_flood_of_special_token_strings_is_refused_at_once(loaded_engine):
    started = time.monotonic()
    _, end = loaded_engine.run(prompt="<|im_start|>" * 80_000, sampling=GREEDY, max_tokens=4)
    assert isinstance(end, p.GenerationFailed) and "special-token strings" in end.message
    assert time.monotonic() - started < 10
