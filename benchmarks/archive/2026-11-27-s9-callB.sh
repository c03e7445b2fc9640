#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-27-s9-callB*
# (5 files); kept as it ran, so it may name code removed since.
# session 9 call B: GPU tests of flat_v (now default) and the page-step flags, ncu of the split
# kernel and its reduce, then the flags timed beside the default
set -o pipefail
export PYTHONPATH=$PWD HEARTH_GPU_TESTS=1 PYTHONUNBUFFERED=1
SECONDS=0
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_kv_page_step.py \
  tests/kernels/test_kv_one_launch.py tests/kernels/test_kv_cache.py \
  -k "llama3_8b or flat or page_step" > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s)"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -12
if command -v ncu >/dev/null; then
  for spec in "rot4/rot4 32768" "f16/f16 32768" "rot4/rot4 4096" "f16/f16 4096"; do
    echo "=== $spec" >> "$OUT/ncu.txt"
    timeout 60 ncu -k regex:decode_ --launch-skip 8 -c 2 --section SpeedOfLight \
      --section Occupancy --section LaunchStats --section WarpStateStats \
      --section SchedulerStats python3 -m benchmarks.kernels.attention_profile $spec \
      >> "$OUT/ncu.txt" 2>&1
  done
  echo "== ncu ($SECONDS s)"
  grep -E "^===|decode_|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Memory Throughput|Theoretical Occ|Stall" "$OUT/ncu.txt" | head -120
fi
OUT="$OUT" FLAGS="mask_tail rotate_q_by_dot" FLAG_TEST_S=1 TEST_S=0 WINDOW_S=0 \
  PAIRS=f16/f16,rot4/rot4,q8/rot4 BENCH_ARGS=--no-write BENCH_S=150 \
  bash benchmarks/kernels/gpu_attention.sh 2>&1 | grep -v "^tests/" | tail -60
echo "== done ($SECONDS s)"
