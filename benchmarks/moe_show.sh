#!/usr/bin/env bash
# Mixture-of-experts models on the Hearth engine (kernels' expert GEMV) beside llama.cpp on one
# NVIDIA GPU, in one command (docs/hearth-engine.md, docs/kernels-moe.md). Two files with random
# blocks, so that both engines load the very same file:
# - a Qwen3-30B-A3B-shaped Q4_K_M (128 experts of 768, 8 used; Q4_K gate/up, Q4_K/Q6_K down)
#   with llama.cpp's Qwen2 vocabulary (Qwen3's own: 151,936 tokens);
# - a gpt-oss-20b-shaped MXFP4_MOE (32 experts of 2880, 4 used; MXFP4 experts with biases,
#   the rest Q8_0) with llama.cpp's Llama 3 vocabulary: the bundle has no gpt-oss (o200k) one,
#   so its embedding and output matrix have 128,256 rows, not 201,088.
# Then benchmarks/hearth_speed.py with --llama-bench on each: load, pp512, TTFT, tg128, decode
# at 32k positions with a kivi4 K / rot4 V cache (and paged f16) beside llama-bench's f16 KV at
# that depth, and each figure's fraction of the bandwidth bound (the bound counts the k experts
# a token reads of each layer, not all of them).
#
#   bash benchmarks/moe_show.sh                 both models; results in $OUT (or ./out)
#   MODELS=qwen3 bash benchmarks/moe_show.sh    one of them (qwen3, gpt-oss)
#   bash benchmarks/moe_show.sh --profile       extra arguments go to hearth_speed
#
# Needs .gpu-bundle/ in the repository root: llama.cpp is built from it first unless
# /tmp/llama/env.sh exists (about 3 minutes). Disk: 17.3 GiB + 10.9 GiB of model files in
# /tmp/models (kept: a second run skips writing them).
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/gpu/show_env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

# show NAME SHAPE QUANT VOCAB [hearth_speed arguments]: write the file once, then measure
show() {
  local name=$1 shape=$2 quant=$3 vocab=$4
  shift 4
  local model=/tmp/models/$name.gguf
  random_model "$model" "$shape" "$quant" "$vocab"
  # one model failing (out of memory, a kernel error) must not lose the other's figures
  python3 -m benchmarks.hearth_speed "$model" --llama-bench --kv paged-f16 kivi4/rot4 "$@" \
    --json "$out/$name.json" 2>&1 | tee "$out/$name.txt" \
    || echo "$name: hearth_speed failed (exit ${PIPESTATUS[0]})" | tee -a "$out/$name.txt"
}

for m in ${MODELS:-qwen3 gpt-oss}; do
  case $m in
    qwen3) show qwen3-30b-a3b-random-q4_k_m qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf "$@" ;;
    gpt-oss) show gpt-oss-20b-random-mxfp4 gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf "$@" ;;
    *) echo "unknown model $m (qwen3, gpt-oss)" >&2; exit 2 ;;
  esac
done
