#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-27-s9-show*
# (7 files); kept as it ran, so it may name code removed since.
# session 9's judged run: the kernels' figures (GEMV at Llama-3-8B shapes against the copy
# rate; decode attention at 4k/32k/128k per KV format) beside llama.cpp's flash-attention
# decode at the same depths (llama-bench -d, f16 / q8_0 / q4_0 caches, the same H100, the
# same call), then the Hearth engine beside llama-bench (hearth_speed) if time is left
set -uo pipefail
export PYTHONUNBUFFERED=1
SECONDS=0
mkdir -p /tmp/llama && cat .llama-build/*part-* | xz -d | tar -C /tmp/llama -x
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
model=/tmp/m.gguf
(python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model" \
  --vocab .vocab/ggml-vocab-llama-bpe.gguf && sync) > "$OUT/write.log" 2>&1 &
writer=$!
timeout 200 python3 -m benchmarks.kernels --batches 1 --pairs f16/f16,q8/q8,rot4/rot4,q8/rot4 \
  --contexts 4096,32768,131072 --json "$OUT/kernels.json" > "$OUT/kernels.txt" 2>&1
echo "== kernels ($SECONDS s)"; cat "$OUT/kernels.txt"
wait $writer; echo "== model written ($SECONDS s)"; tail -2 "$OUT/write.log"
bench() {  # depth, cache type, seconds
  timeout "$3" llama-bench -m "$model" -p 0 -n 32 -r 1 -fa 1 -ctk "$2" -ctv "$2" -d "$1" -o csv \
    2>/dev/null | tee -a "$OUT/llama-bench.csv" | tail -1
}
for depth in 0 4096 32768; do for kv in f16 q8_0 q4_0; do bench $depth $kv 45; done; done
echo "== llama-bench to 32k ($SECONDS s)"
timeout 150 python3 -m benchmarks.hearth_speed "$model" --kv paged-f16 rot4 q8/rot4 \
  --json "$OUT/hearth-speed.json" > "$OUT/hearth-speed.txt" 2>&1
echo "== hearth_speed ($SECONDS s)"; tail -40 "$OUT/hearth-speed.txt"
for kv in f16 q8_0; do bench 131072 $kv 60; done
echo "== done ($SECONDS s)"
