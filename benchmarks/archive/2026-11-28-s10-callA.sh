#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callA*
# (6 files); kept as it ran, so it may name code removed since.
# session 10 call A: the attention step's anatomy (kernel times, gaps, occupancy by CUDA),
# launch shapes that fit more programs an SM once counted per sub-partition, chained launches;
# their GPU tests; the prefill (pp512) profile on main
set -uo pipefail
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
SECONDS=0
pip install --no-index --no-deps --target /tmp/site .gpu-bundle/wheels/gguf*.whl >/dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
model=/tmp/m.gguf
(python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model" \
  --vocab .vocab/ggml-vocab-llama-bpe.gguf && sync) > "$OUT/write.log" 2>&1 &
writer=$!
timeout 150 python3 -m benchmarks.kernels.attention_anatomy --pairs f16/f16,rot4/rot4 \
  --contexts 4096,32768 --json "$OUT/anatomy.json" 2>&1 | tee "$OUT/anatomy.txt"
echo "== anatomy ($SECONDS s)"
timeout 200 python3 docs/measurements/2026-11-28-s10-callA-sweep.py 2>&1 | tee "$OUT/sweep.txt"
echo "== sweep ($SECONDS s)"
timeout 100 python3 -m pytest tests/kernels/test_occupancy.py tests/kernels/test_kv_page_step.py \
  tests/kernels/test_kv_cache_positions.py -k "occupancy or llama3_8b or chained" -v \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$OUT/tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -8
wait $writer; tail -1 "$OUT/write.log"
timeout 120 python3 -m benchmarks.prefill_profile "$model" > "$OUT/prefill.txt" 2>&1
echo "== prefill ($SECONDS s)"; head -40 "$OUT/prefill.txt"
