#!/usr/bin/env bash
# Session 12, call A (one H200): llama.cpp built from the bundle, then benchmarks/moe_show.sh
# (Qwen3-30B-A3B-shaped Q4_K_M and gpt-oss-20b-shaped MXFP4 beside llama-bench, with the
# kernels of one eager decode step), then the build packed for the next calls if it is small.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
{ time bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama; } >"$out/build.txt" 2>&1
source /tmp/llama/env.sh
echo "built after $(( $(date +%s) - start )) s" | tee -a "$out/build.txt"
OUT="$out/moe" timeout 450 bash benchmarks/moe_show.sh --profile
echo "moe_show done after $(( $(date +%s) - start )) s" | tee -a "$out/build.txt"
src=$(ls -d /tmp/llama/llama_cpp_python-*)
tar -cf - -C / tmp/llama/env.sh tmp/llama/site tmp/llama/cxx-runtime "${src#/}/build/bin" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" 2>>"$out/build.txt" \
  | xz -T16 -6 >/tmp/llama-build.tar.xz
ls -la /tmp/llama-build.tar.xz "$src/build/bin" | tee -a "$out/build.txt"
size=$(stat -c %s /tmp/llama-build.tar.xz)
[ "$size" -lt 16000000 ] && cp /tmp/llama-build.tar.xz "$out/"
echo "all done after $(( $(date +%s) - start )) s" | tee -a "$out/build.txt"
