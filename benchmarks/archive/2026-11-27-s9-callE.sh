#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-27-s9-callE*
# (4 files); kept as it ran, so it may name code removed since.
# session 9 call E: GPU tests of the lean reduce and the late wait, then both timed beside the
# default (f16/f16, rot4/rot4, q8/rot4 at 4k/32k/128k)
set -o pipefail
export PYTHONPATH=$PWD HEARTH_GPU_TESTS=1 PYTHONUNBUFFERED=1
SECONDS=0
timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_kv_page_step.py \
  > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s)"; grep -E "FAILED|ERROR|passed|failed|Error" "$OUT/tests.log" | tail -12
OUT="$OUT" FLAGS="lean_reduce late_wait" FLAG_TEST_S=1 TEST_S=0 WINDOW_S=0 \
  PAIRS=f16/f16,rot4/rot4,q8/rot4 BENCH_ARGS=--no-write BENCH_S=150 \
  bash benchmarks/kernels/gpu_attention.sh 2>&1 | grep -v "^tests/" | tail -75
echo "== done ($SECONDS s)"
