#!/usr/bin/env bash
# Session 12, call B (one H200): llama.cpp built from the bundle; benchmarks/moe_show.sh after
# the MoE routing in one launch, the MoE prefill on tensor cores and gpt-oss's sinks in the
# decode kernel; the Hearth engine's batch on the GPU (tests/engine/hearth/test_gpu_batch.py);
# then the build packed in three parts for a later call on a fresh machine.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
{ time bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama; } >"$out/build.txt" 2>&1
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH"
echo "built after $(( $(date +%s) - start )) s" | tee -a "$out/build.txt"
OUT="$out/moe" timeout 330 bash benchmarks/moe_show.sh
echo "moe_show done after $(( $(date +%s) - start )) s" | tee -a "$out/build.txt"
HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/hearth/test_gpu_batch.py 2>&1 | tail -30 >>"$out/build.txt"
cat "$out/moe/gpu.txt" >>"$out/build.txt" && rm "$out/moe/gpu.txt"  # eight files come back
echo "batch tests done after $(( $(date +%s) - start )) s" | tee -a "$out/build.txt"
src=$(ls -d /tmp/llama/llama_cpp_python-*)
tar -cf - -C / tmp/llama/env.sh tmp/llama/site tmp/llama/cxx-runtime "${src#/}/build/bin" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" 2>>"$out/build.txt" \
  | xz -T16 -6 | split -b 15900000 - "$out/llama-build.tar.xz."
echo "all done after $(( $(date +%s) - start )) s" | tee -a "$out/build.txt"
