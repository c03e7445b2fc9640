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
source benchmarks/gpu/show_env.sh
model=/tmp/models/llama3-8b-random-q4_k_m.gguf
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
random_model "$model" llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf
python3 -m benchmarks.hearth_speed "$model" --llama-bench "$@" --json "$out/hearth-speed.json" \
  2>&1 | tee "$out/hearth-speed.txt"
