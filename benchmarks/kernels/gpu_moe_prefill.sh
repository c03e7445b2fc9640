#!/usr/bin/env bash
# One device call for the MoE prefill grouped GEMM (docs/kernels-moe-prefill.md): its GPU tests
# (the real shapes, and the interpreter tests' file compiled for the GPU), then the benchmark
# rows (python -m benchmarks.kernels.moe_prefill: Qwen3-30B-A3B Q4_K_M and gpt-oss-20b MXFP4,
# 512 and 64 tokens, grouped GEMM beside the sliced expert GEMV). Each step has its own time
# limit, so the call returns what the others printed. OUT: where the outputs go (gpu.txt,
# tests.txt, prefill.txt, prefill.json, sweep.txt). SWEEP_S (default 60; 0: off): also the
# launch shapes of benchmarks/kernels/moe_prefill.py's SWEEP at 512 tokens, for that long.
set -o pipefail
: "${OUT:?set OUT}" "${TEST_S:=120}" "${BENCH_S:=60}" "${SWEEP_S:=60}"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
# (the device, torch and triton: the benchmark's first line) the tests' reference is gguf's
# dequantizer with MXFP4, from the wheel in the tree where there is one
ls gguf-*.whl 2>/dev/null | head -1 | xargs -r python -m pip install -q --no-deps 2>&1 | grep -v root
start=$SECONDS
timeout "$TEST_S" python -m pytest tests/kernels/test_moe_grouped_gemm_gpu.py \
    tests/kernels/test_moe_grouped_gemm.py -q -p no:cacheprovider -rs > "$OUT/tests.txt" 2>&1
echo "tests: exit $?, $((SECONDS - start)) s" | tee "$OUT/gpu.txt"
tail -8 "$OUT/tests.txt"
timeout "$BENCH_S" python -m benchmarks.kernels.moe_prefill --tokens 512,64 \
    --json "$OUT/prefill.json" > "$OUT/prefill.txt" 2>&1
echo "benchmark: exit $?, $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
cat "$OUT/prefill.txt"
if [ "$SWEEP_S" -gt 0 ]; then
    timeout "$SWEEP_S" python -m benchmarks.kernels.moe_prefill --tokens 512 --sweep \
        > "$OUT/sweep.txt" 2>&1
    echo "sweep: exit $?, $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
    grep -E "sweep|grouped" "$OUT/sweep.txt"
fi
