"""`hearth bench` end to end on the CPU with the starter model (quick settings)."""

import json
import subprocess
import sys

import pytest

from engine.benchmark.report import Comparison, compare

FIGURES = {
    "load_s": 1.0,
    "prefill_tok_s": 950.0,
    "time_to_first_token_s": 0.055,
    "decode_128_tok_s": 264.0,
    "decode_at_depth_tok_s": 200.0,
}


def test_the_benchmark_reports_every_figure_without_llama_bench():
    cmd = [sys.executable, "-m", "app.launcher", "bench", "--reps", "1", "--prompt", "64"]
    cmd += ["--decode", "16", "64", "--depth", "256", "--no-llama-bench", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(done.stdout)
    hearth = report["hearth"]
    for key in ("load_s", "prefill_tok_s", "time_to_first_token_s", "decode_16_tok_s",
                "decode_64_tok_s", "decode_at_depth_tok_s", "peak_worker_rss_bytes"):  # fmt: skip
        assert hearth[key] > 0, key
    assert {row["metric"] for row in report["rows"]} >= {"load", "prefill", "decode at depth"}
    # the speed of light beside each decode figure: the CPU's copy rate, measured by the worker
    assert hearth["bound_16_tok_s"] > hearth["bound_at_depth_tok_s"] > 0
    assert hearth["bandwidth_source"] == "measured copy rate" and hearth["bandwidth_gbps"] > 0
    assert all(row["ratio"] is None for row in report["rows"])
    # Progress on stderr, one line per phase, so that minutes of work never look like a hang.
    progress = [line for line in done.stderr.splitlines() if line.startswith("[bench] ")]
    assert progress[0] == "[bench] Starting the engine…"
    assert "[bench] Decoding 64 tokens…" in progress
    assert progress[-1] == "[bench] Decoding at a depth of 256 tokens…"


@pytest.mark.parametrize(
    "metric, reference, target_met",
    [
        ("decode 128", {"decode_128_tok_s": 270.0}, True),  # 264 / 270 = 0.978 >= 0.97
        ("decode 128", {"decode_128_tok_s": 276.0}, False),  # 0.957
        ("time to first token", {"prefill_s": 0.05}, True),  # 1.1 x 0.05 >= 0.055
        ("time to first token", {"prefill_s": 0.049}, False),
        ("load", {"load_s": 0.8}, False),  # 1.25 > 1.2
    ],
)
def test_ratios_are_held_to_their_targets(metric, reference, target_met):
    rows = {row.metric: row for row in compare(FIGURES, reference)}
    assert rows[metric].meets_target is target_met


def test_each_decode_figure_is_set_beside_its_speed_of_light():
    from engine.cli.bench_cmd import speed_of_light

    figures = {**FIGURES, "bound_128_tok_s": 440.0, "bound_at_depth_tok_s": 400.0,
               "bandwidth_gbps": 3000.0, "bandwidth_source": "measured copy rate"}  # fmt: skip
    assert speed_of_light(figures) == {
        "decode 128: speed of light": "60% of the 440 tok/s bound",
        "decode at depth: speed of light": "50% of the 400 tok/s bound",
        "bandwidth the bound divides by": "3,000.0 GB/s (measured copy rate)",
    }
    assert speed_of_light(FIGURES) == {}  # no bound known: nothing said


def test_a_figure_without_a_reference_has_no_verdict():
    row = Comparison("prefill", 10.0, "tok/s", None, ">= 0.95")
    assert row.ratio is None and row.meets_target is None


def test_settings_that_do_not_fit_are_refused_before_anything_loads(tmp_path, monkeypatch):
    import engine.session
    from engine.benchmark.hearth_run import BenchConfig
    from engine.cli.bench_cmd import bench_does_not_fit
    from engine.hardware import Detection, Device
    from engine.hardware.records import CPU
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

    gib = 1024**3
    laptop = Detection(
        devices=(Device("cpu", "other", "CPU", CPU, ("cpu",), "psutil", 16 * gib, 12 * gib),)
    )
    monkeypatch.setattr(
        engine.session, "snapshot_machine", lambda: engine.session.MachineSnapshot(laptop)
    )
    big = write_sparse_gguf(tmp_path / "mixtral.gguf", SHAPES["mixtral-8x7b"], "Q4_K_M")
    small = write_sparse_gguf(tmp_path / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    problem = bench_does_not_fit(BenchConfig(model=str(big)))
    assert problem is not None and "more on system RAM" in problem
    assert bench_does_not_fit(BenchConfig(model=str(small), depth=0)) is None


@pytest.mark.slow
def test_both_engines_side_by_side_on_the_cpu():
    """The Hearth engine forced onto the CPU (HEARTH_ENGINE_DEVICE=cpu) beside llama.cpp."""
    import os

    cmd = [sys.executable, "-m", "app.launcher", "bench", "--engine", "both", "--reps", "1"]
    cmd += ["--prompt", "8", "--decode", "4", "--depth", "0", "--no-llama-bench", "--json"]
    env = {**os.environ, "HEARTH_ENGINE_DEVICE": "cpu"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True, env=env)
    report = json.loads(done.stdout)
    assert set(report["engines"]) == {"llama", "hearth"}
    for figures in report["engines"].values():
        assert figures["decode_4_tok_s"] > 0 and figures["load_s"] > 0
    rows = {row["metric"]: row for row in report["rows"]}
    assert rows["decode 4"]["target"] == ">= 1.3" and rows["load"]["target"] == "<= 1.5"
    assert rows["time to first token"]["ratio"] > 0  # the llama.cpp worker's own TTFT
    assert "[bench] Engine: the Hearth engine" in done.stderr


def test_the_hearth_engine_is_held_to_its_own_targets():
    from engine.benchmark.report import compare_engines

    worker = {**FIGURES, "decode_128_tok_s": 200.0, "decode_at_depth_tok_s": 100.0}
    rows = {r.metric: r for r in compare_engines(FIGURES, worker, "rot4/rot4")}
    assert rows["decode 128"].meets_target  # 264 / 200 = 1.32 >= 1.3
    assert rows["decode at depth"].target == ">= 1.5" and rows["decode at depth"].meets_target
    assert rows["time to first token"].ratio == 1.0  # against the worker's own TTFT
    f16 = {r.metric: r for r in compare_engines(FIGURES, worker, "f16")}
    assert f16["decode at depth"].target == ">= 1.3"


def test_a_hearth_kv_pair_the_engine_does_not_hold_is_refused():
    import argparse

    from engine.cli.bench_cmd import hearth_kv

    assert hearth_kv("q8/rot4") == ("q8", "rot4") and hearth_kv("rot4") == ("rot4", "rot4")
    for bad in ("q8_0", "rot4/rot2"):
        with pytest.raises(argparse.ArgumentTypeError):
            hearth_kv(bad)
