#!/usr/bin/env bash
# On an NVIDIA machine without network (see docs/performance.md): build the engine's llama.cpp
# with CUDA, write a Llama-3-8B-shaped Q4_K_M GGUF, and run the given steps.
#
# Usage: benchmarks/gpu_run.sh STEP...     steps: bench, bench-q8, bench-cpu-sampling, tests
# Needs .gpu-bundle/ (made by make-bundle.sh) in the repository root. Results go to $OUT (or ./out).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
bash .gpu-bundle/build-cuda.sh .gpu-bundle /tmp/llama >/dev/null
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH" PYTHONUNBUFFERED=1
src=$(ls -d /tmp/llama/llama_cpp_python-*)
models=/tmp/models; mkdir -p "$models"
q4="$models/llama3-8b-q4_k_m.gguf"
if [ ! -f "$q4" ]; then
  python3 benchmarks/synthetic_gguf.py llama3-8b "$models/llama3-8b-f16.gguf" \
    --vocab "$src/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf"
  llama-quantize "$models/llama3-8b-f16.gguf" "$q4" Q4_K_M 16 >"$out/quantize.log" 2>&1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for step in "$@"; do
  case "$step" in
    bench) python3 -m app.launcher bench "$q4" --kv f16 | tee "$out/bench-f16.txt" ;;
    diag-prefill)
      python3 benchmarks/diag_prefill.py "$q4" 2>/dev/null | tee "$out/diag-prefill.txt"
      llama-bench -m "$q4" -p 512 -n 0 -fa 1 -r 5 | tee -a "$out/diag-prefill.txt"
      python3 -m app.launcher bench "$q4" --decode 128 --depth 0 | tee "$out/bench-small-ctx.txt" ;;
    bench-q8) python3 -m app.launcher bench "$q4" --kv q8_0 | tee "$out/bench-q8_0.txt" ;;
    bench-cpu-sampling)
      python3 -m app.launcher bench "$q4" --cpu-sampling --decode 128 --depth 0 \
        | tee "$out/bench-cpu-sampling.txt" ;;
    tests)  # the GPU machine has no PySide6 or Hypothesis: collect only the GPU test files
      mapfile -t files < <(grep -rl "pytestmark = pytest.mark.gpu" tests)
      HEARTH_GPU_TESTS=1 HEARTH_GPU_TEST_MODEL="$q4" \
        python3 -m pytest -v -p no:cacheprovider "${files[@]}" 2>&1 | tee "$out/gpu-tests.log" \
        || echo "GPU TESTS FAILED" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
