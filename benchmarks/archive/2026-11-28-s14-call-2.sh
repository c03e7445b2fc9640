#!/usr/bin/env bash
# Session 14, call 2 (one H200): issue 34. The build unpacked from .llama-pack (if the machine is
# fresh); the MoE prefill grouped GEMM's GPU tests and benchmark rows
# (benchmarks/kernels/gpu_moe_prefill.sh) while the Qwen3-30B-A3B- and gpt-oss-20b-shaped random
# files are written; the decode launches per layer on the GPU (benchmarks/moe_launches.py); then
# benchmarks/moe_show.sh: Qwen3 with tg128, pp512 and decode at 32k with a kivi4 K / rot4 V cache,
# gpt-oss with tg128 and pp512, each beside llama-bench of the same build.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out/prefill" "$out/moe" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${DEADLINE_S:-580} - ($(date +%s) - start) )); }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$out/steps.txt"
cd "$PWD"; source benchmarks/gpu/show_env.sh; out=${OUT:-out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt"
since unpacked
( random_model /tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf
  random_model /tmp/models/gpt-oss-20b-random-mxfp4.gguf gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf
) >/tmp/logs/write-moe.txt 2>&1 &
writer=$!
OUT="$out/prefill" SWEEP_S=40 TEST_S=120 BENCH_S=60 bash benchmarks/kernels/gpu_moe_prefill.sh \
  >"$out/prefill/stdout.txt" 2>&1
since "grouped GEMM tests and rows"
timeout 90 python3 -m benchmarks.moe_launches --device cuda --json "$out/launches.json" \
  >"$out/launches.txt" 2>&1
since launches
wait $writer; since "MoE files written"; tail -4 /tmp/logs/write-moe.txt >>"$out/steps.txt"
OUT="$out/moe" MODELS=qwen3 timeout $(( $(left) - 150 )) bash benchmarks/moe_show.sh --kv kivi4/rot4
since "qwen3 show"
OUT="$out/moe" MODELS=gpt-oss timeout $(( $(left) - 3 )) bash benchmarks/moe_show.sh --depth 0 --kv
since "gpt-oss show"
