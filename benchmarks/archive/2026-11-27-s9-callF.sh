#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-27-s9-callF*
# (3 files); kept as it ran, so it may name code removed since.
# session 9 call F: GPU tests of the interleaved scales/mins, then old and new tree alternately
set -o pipefail
export HEARTH_GPU_TESTS=1 PYTHONUNBUFFERED=1
SECONDS=0
PYTHONPATH=$PWD timeout 130 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_kv_cache.py \
  tests/kernels/test_kv_cache_positions.py tests/kernels/test_kv_one_launch.py \
  tests/kernels/test_kv_page_step.py tests/kernels/test_kv_kivi.py > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s)"; grep -E "FAILED|ERROR|passed|failed|Error" "$OUT/tests.log" | tail -12
for round in 1 2; do
  (cd .dev/base && PYTHONPATH=$PWD timeout 80 python3 sweepF.py old)
  PYTHONPATH=$PWD timeout 80 python3 .dev/sweepF.py new
done
echo "== done ($SECONDS s)"
