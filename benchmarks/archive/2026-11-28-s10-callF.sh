#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callF*
# (8 files); kept as it ran, so it may name code removed since.
# session 10 call F: Q4_K matrices of 8192 rows or more at 8 rows a program (default_config's
# tall_rows): its GPU tests, the GEMV table (x in 8 bits beside), the sweep's default on Q4_K's
# shapes, and the engine's decode with it (hearth_speed, tg128 and 32k)
set -uo pipefail
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
SECONDS=0
pip install --no-index --no-deps --target /tmp/site $(ls .gpu-bundle/wheels/gguf*.whl .dev/wheels/gguf*.whl 2>/dev/null | head -1) >/dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
model=/tmp/m.gguf
(python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model" \
  --vocab .vocab/ggml-vocab-llama-bpe.gguf && sync) > "$OUT/write.log" 2>&1 &
writer=$!
timeout 90 python3 -m pytest tests/kernels/test_gemv_dp4a.py tests/kernels/test_gemv.py -m gpu -v -p no:cacheprovider \
  -k "gate_up or tall or (sweep_candidates_at_llama3_8b_shapes and default and not l2)" > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$OUT/tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -8
timeout 60 python3 -m benchmarks.kernels --batches 1 --no-attention --formats Q4_K,Q6_K \
  --json "$OUT/gemv.json" > "$OUT/gemv.txt" 2>&1
echo "== gemv ($SECONDS s)"; cat "$OUT/gemv.txt"
timeout 60 python3 -m benchmarks.kernels.gemv_sweep --formats Q4_K --names none --passes 2 --no-mixed \
  --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "== sweep ($SECONDS s)"; grep -v "^  (" "$OUT/sweep.txt"
wait $writer; tail -1 "$OUT/write.log"
timeout 150 python3 -m benchmarks.hearth_speed "$model" --kv paged-f16 rot4 \
  --json "$OUT/hearth-speed.json" > "$OUT/hearth-speed.txt" 2>&1
echo "== hearth_speed ($SECONDS s)"; tail -10 "$OUT/hearth-speed.txt"
