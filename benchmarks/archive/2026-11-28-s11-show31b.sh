#!/usr/bin/env bash
# Produced docs/measurements/2026-11-28-s11-show31/callB/ (call B, the same warm machine as call A).
# Issue 31's GPU show, call B (the same warm machine): hearth_show on the pruned tree (with the
# engine seam), then the engine's GPU tests.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="/tmp/site:$PWD"
SECONDS=0
mkdir -p "$OUT/new"
OUT="$OUT/new" timeout 300 bash benchmarks/hearth_show.sh > "$OUT/new-show.log" 2>&1
echo "new hearth_show: exit $? at $SECONDS s"
tail -45 "$OUT/new/hearth-speed.txt"
source /tmp/llama/env.sh
HEARTH_GPU_TESTS=1 timeout 240 python3 -m pytest tests/engine/hearth/test_gpu.py \
  tests/engine/runtime/test_gpu_worker.py tests/engine/runtime/test_gpu_matches_cpu.py \
  -q -p no:cacheprovider -rs > "$OUT/engine-tests.txt" 2>&1
echo "engine GPU tests: exit $? at $SECONDS s"; tail -8 "$OUT/engine-tests.txt"
