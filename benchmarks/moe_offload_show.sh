#!/usr/bin/env bash
# Experts in system RAM on a simulated 12 GiB card (issue 34's "Experts in RAM" show): the
# Hearth engine with the planner's placement (the last layers' experts in pinned RAM, a cache
# of experts on the GPU; engine/hearth/expert_offload.py) beside llama-bench tg128 at several
# --n-cpu-moe settings at the same free VRAM, with the planner's predictions beside both
# (benchmarks/moe_offload.py says how each figure is taken).
#
#   bash benchmarks/moe_offload_show.sh            results in $OUT (or ./out)
#   CARD=16 bash benchmarks/moe_offload_show.sh    another card size (GiB left free)
#
# The model: the Qwen3-30B-A3B-shaped Q4_K_M with random blocks that benchmarks/moe_show.sh
# writes (/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf, 17.3 GiB), written here if missing.
# Needs .gpu-bundle/ in the repository root unless /tmp/llama/env.sh exists (llama.cpp's
# CUDA build, about 3 minutes). About 4 minutes once both are there.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/gpu/show_env.sh
model=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
random_model "$model" qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf
nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current \
  --format=csv,noheader | tee "$out/gpu.txt"
python3 -m benchmarks.moe_offload --model "$model" --card "${CARD:-12}" --out "$out" 2>&1 \
  | tee "$out/moe_offload.txt"
