"""`hearth bench` on an NVIDIA GPU beside llama-bench (run by benchmarks/gpu_run.sh tests)."""

import json
import os
import subprocess
import sys

import pytest

from engine.benchmark.llama_bench import find_llama_bench

pytestmark = pytest.mark.gpu


def test_the_benchmark_runs_beside_llama_bench_and_reports_every_ratio():
    if find_llama_bench() is None:
        pytest.fail("llama-bench is not on PATH: source the CUDA build's env.sh first")
    model = os.environ.get("HEARTH_GPU_TEST_MODEL", "")  # empty: the starter model
    cmd = [sys.executable, "-m", "app.launcher", "bench", *filter(None, [model])]
    cmd += ["--reps", "1", "--depth", "1024"]
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=900, check=True)
    report = json.loads(done.stdout)
    assert report["hearth"]["peak_device_bytes"] > 50 * 2**20
    for row in report["rows"]:
        assert row["llama_cpp"] is not None, row
        assert row["ratio"] > 0, row
