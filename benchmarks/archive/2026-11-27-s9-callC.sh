#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-27-s9-callC*
# (4 files); kept as it ran, so it may name code removed since.
# session 9 call C: GPU tests of mask_tail (now default for rot4/rot4) and the one-step reduce,
# then both timed beside the default
set -o pipefail
export PYTHONPATH=$PWD HEARTH_GPU_TESTS=1 PYTHONUNBUFFERED=1
SECONDS=0
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_kv_page_step.py \
  tests/kernels/test_kv_cache.py -k "llama3_8b" > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s)"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -12
OUT="$OUT" FLAGS="mask_tail one_step_reduce" FLAG_TEST_S=1 TEST_S=0 WINDOW_S=0 \
  PAIRS=f16/f16,rot4/rot4,q8/rot4,q8/q8 BENCH_ARGS=--no-write BENCH_S=200 \
  bash benchmarks/kernels/gpu_attention.sh 2>&1 | grep -v "^tests/" | tail -75
echo "== done ($SECONDS s)"
