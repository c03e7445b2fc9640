#!/usr/bin/env bash
# One device call for the expert GEMV (docs/kernels-moe.md): its GPU tests at the real shapes
# (and the interpreter tests' file compiled for the GPU), then the benchmark rows
# (python -m benchmarks.kernels.moe: Qwen3-30B-A3B Q4_K_M and gpt-oss-20b MXFP4, 1/4/16
# tokens, beside torch and the copy rate). Each step has its own time limit, so the call returns
# what the others printed. OUT: where the outputs go (gpu.txt, tests.txt, moe.txt, moe.json).
# SWEEP=1: also the launch shapes of benchmarks/kernels/moe.py's SWEEP (one token; each shape
# compiles anew, a few seconds each). TOKENS: tokens a step (default 1,4,16).
set -o pipefail
: "${OUT:?set OUT}" "${TEST_S:=300}" "${BENCH_S:=480}" "${TOKENS:=1,4,16}"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
    | tee -a "$OUT/gpu.txt"
# the tests' reference is gguf's dequantizer (with MXFP4): a gguf wheel in the tree is installed
for wheel in gguf-*.whl; do
    [ -e "$wheel" ] && python -m pip install -q --no-deps "$wheel" 2>&1 | grep -v "as the 'root'"
done
python -c "import gguf; gguf.GGMLQuantizationType.MXFP4" 2>&1 | tail -1 \
    | sed 's/^/import gguf: /' | tee -a "$OUT/gpu.txt"
start=$SECONDS
timeout "$TEST_S" python -m pytest tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_gemv.py \
    -q -p no:cacheprovider -rs > "$OUT/tests.txt" 2>&1
echo "tests: exit $?, $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
tail -5 "$OUT/tests.txt"
timeout "$BENCH_S" python -m benchmarks.kernels.moe --tokens "$TOKENS" ${SWEEP:+--sweep} --json "$OUT/moe.json" \
    > "$OUT/moe.txt" 2>&1
echo "benchmark: exit $?, $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
cat "$OUT/moe.txt"
