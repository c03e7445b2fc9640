#!/usr/bin/env bash
# The Hearth engine beside llama.cpp on one NVIDIA GPU, in one command (docs/performance.md,
# "The Hearth engine"): a Llama-3-8B-shaped Q4_K_M with random blocks and llama.cpp's Llama 3
# vocabulary, so both engines load the very same file; then benchmarks/hearth_speed.py with
# --llama-bench (load, pp512, TTFT, tg128, decode at 32k per KV format, bandwidth fractions).
#
#   bash benchmarks/hearth_show.sh          results in $OUT (or ./out)
#
# Needs .gpu-bundle/ (benchmarks/gpu/make_bundle.sh) in the repository root: llama.cpp is built
# from it first unless /tmp/llama/env.sh exists (about 3 minutes); after the build this takes
# under 4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
[ -f /tmp/llama/env.sh ] || bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/dev/null
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH" PYTHONUNBUFFERED=1
src=$(ls -d /tmp/llama/llama_cpp_python-*)
model=/tmp/models/llama3-8b-random-q4_k_m.gguf
mkdir -p /tmp/models
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
[ -f "$model" ] || { python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model" \
  --vocab "$src/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" && sync; }
# (sync: the just-written file's pages are written back before either engine's load is timed)
python3 -m benchmarks.hearth_speed "$model" --llama-bench "$@" --json "$out/hearth-speed.json" \
  2>&1 | tee "$out/hearth-speed.txt"
