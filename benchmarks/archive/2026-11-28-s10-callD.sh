#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callD*
# (6 files); kept as it ran, so it may name code removed since.
# session 10 call D: the KV cache's GPU tests with the new attention defaults (reduce at 4
# warps, chained launches); the GEMV table at batch 1 with the engine's figure beside (x in 8
# bits); kivi4/rot4 and rot2/rot4 with the new defaults beside f16 and rot4 at 32k
set -uo pipefail
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
SECONDS=0
pip install --no-index --no-deps --target /tmp/site $(ls .gpu-bundle/wheels/gguf*.whl .dev/wheels/gguf*.whl 2>/dev/null | head -1) >/dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 60 python3 -m benchmarks.kernels --batches 1 --no-attention --formats Q4_K,Q6_K \
  --json "$OUT/gemv.json" > "$OUT/gemv.txt" 2>&1
echo "== gemv ($SECONDS s)"; cat "$OUT/gemv.txt"
timeout 90 python3 -m benchmarks.kernels --no-gemv --no-write --pairs f16/f16,rot4/rot4,kivi4/rot4,rot2/rot4 \
  --contexts 4096,32768 --json "$OUT/attention.json" > "$OUT/attention.txt" 2>&1
echo "== attention ($SECONDS s)"; cat "$OUT/attention.txt"
timeout 330 python3 -m pytest tests/kernels/test_kv_cache.py tests/kernels/test_kv_kivi.py \
  tests/kernels/test_kv_cache_positions.py tests/kernels/test_kv_one_launch.py tests/kernels/test_kv_page_step.py \
  -m gpu -v -p no:cacheprovider -x > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$OUT/tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -8
