#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callE*
# (4 files); kept as it ran, so it may name code removed since.
# session 10 call E: Q4_K GEMV with 8 rows a program (rit 8x16 w2: 8 programs an SM, so the next
# matrix's programs all fit beside this one's), its GPU tests, then the sweep (default, it, the
# default again; 3 passes; x given in 8 bits, as the engine runs it)
set -uo pipefail
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
SECONDS=0
pip install --no-index --no-deps --target /tmp/site $(ls .gpu-bundle/wheels/gguf*.whl .dev/wheels/gguf*.whl 2>/dev/null | head -1) >/dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 100 python3 -m pytest tests/kernels/test_gemv_dp4a.py -m gpu -v -p no:cacheprovider \
  -k "sweep_candidates_at_llama3_8b_shapes and (default or 8x16) and Q4_K" > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$OUT/tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -8
timeout 240 python3 -m benchmarks.kernels.gemv_sweep --formats Q4_K --names "rit 8x16 w2" --passes 3 \
  --no-mixed --json "$OUT/sweep.json" 2>&1 | tee "$OUT/sweep.txt"
echo "== sweep ($SECONDS s)"
