#!/usr/bin/env bash
# The kernels' whole Show run on an NVIDIA machine without network, in one command (see
# docs/kernels.md): the gpu-marked kernel tests (full size on the 1024x4096 GEMV shape),
# `python -m benchmarks.kernels` (BENCH_ARGS: more of its options), and llama.cpp's own
# flash-attention decode at the same depths with f16, q8_0 and q4_0 caches (llama-bench -d), on
# a Llama-3-8B-shaped Q4_K_M with random weights. Took 560 s on an H100 and was cut there during
# the 128k q8_0 run: give it the full 600 s, or LLAMA_S=45.
# llama.cpp is built and the model written in the background while the kernels use the GPU.
#
# PART=attention runs only the KV cache's tests and figures (gpu_attention.sh, about 3 minutes
# on an H100) before llama-bench, in place of every kernel's.
# Needs .gpu-bundle/ (benchmarks/gpu/make_bundle.sh) in the repository root; results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-bundle/wheels/gguf*.whl
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem \
  --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  | tee -a "$out/gpu.txt"
model=/tmp/models/llama3-8b-q4_k_m.gguf
(
  set -e
  bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama
  source /tmp/llama/env.sh
  vocab=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf
  mkdir -p /tmp/models
  python3 -m testkit.synthetic_gguf llama3-8b /tmp/models/f16.gguf --vocab "$vocab"
  llama-quantize /tmp/models/f16.gguf "$model" Q4_K_M 16
  rm -f /tmp/models/f16.gguf
) >"$out/llama-build.log" 2>&1 &
background=$!

SECONDS=0
if [ "${PART:-all}" = attention ]; then  # the KV cache's part only, about 3 minutes
  OUT="$out" SWEEP="" bash benchmarks/kernels/gpu_attention.sh
else
# the full-size GEMV checks on the 1024x4096 shape (numpy's reference for 4096x14336 takes
# minutes of CPU beside the llama.cpp build)
HEARTH_GPU_TESTS=1 timeout "${TEST_S:-150}" python3 -m pytest tests/kernels -v -p no:cacheprovider \
  -k "not llama3_8b_shapes or shape0" >"$out/gpu-tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$out/gpu-tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$out/gpu-tests.log" | tail -12
timeout "${BENCH_S:-240}" python3 -m benchmarks.kernels --batches 1,16 ${BENCH_ARGS:-} \
  --json "$out/kernels.json" >"$out/kernels.txt" 2>&1
echo "== kernels ($SECONDS s)"; cat "$out/kernels.txt"
fi
wait "$background" || { echo "llama.cpp build or model failed:"; tail -20 "$out/llama-build.log"; }
echo "== llama.cpp ready ($SECONDS s)"
source /tmp/llama/env.sh
for depth in 0 4096 32768 131072; do  # the deepest last: the others must not wait on it
  for kv in f16 q8_0 q4_0; do
    timeout "${LLAMA_S:-60}" llama-bench -m "$model" -p 0 -n 32 -r 1 -fa 1 -ctk "$kv" -ctv "$kv" \
      -d "$depth" -o csv 2>/dev/null | tee -a "$out/llama-bench.csv" | tail -1
  done
done
echo "== done ($SECONDS s)"
