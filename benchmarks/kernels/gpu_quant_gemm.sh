#!/usr/bin/env bash
# One device call for the dense quantized GEMM (kernels/packed_gemm.py): its GPU tests (Llama-3-8B
# shapes, the interpreter tests' file compiled for the GPU, and test_gpu_batch.py: a 20-row batch
# step through KernelsOps), then the benchmark rows
# (python -m benchmarks.kernels.quant_gemm: GEMV in slices of 16, dequantize + torch's GEMM and
# the quantized GEMM at 16..512 rows, with the thresholds they give KernelsOps), then the GEMM's
# launch shapes (--sweep) at 64 and 512 rows. Each step has its own time limit (under 3 minutes
# in all), so the call returns what the others printed. OUT: where the outputs go (tests.txt,
# gemm.txt, gemm.json, sweep.txt).
set -o pipefail
: "${OUT:?set OUT}" "${TEST_S:=70}" "${BENCH_S:=70}" "${SWEEP_S:=35}"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the tests' reference is gguf's dequantizer: from the bundle's wheel where it is not installed
if ! python -c "import gguf" 2>/dev/null; then
    wheel=$(ls .gpu-bundle/wheels/gguf-*.whl gguf-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python -m pip install -q --no-index --no-deps --target /tmp/site "$wheel" \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
start=$SECONDS
timeout "$TEST_S" python -m pytest tests/kernels/test_packed_gemm_gpu.py \
    tests/kernels/test_packed_gemm.py tests/engine/hearth/test_gpu_batch.py -q -p no:cacheprovider -rs > "$OUT/tests.txt" 2>&1
echo "tests: exit $?, $((SECONDS - start)) s"
tail -6 "$OUT/tests.txt"
timeout "$BENCH_S" python -m benchmarks.kernels.quant_gemm --rows 16,32,64,128,512 \
    --json "$OUT/gemm.json" > "$OUT/gemm.txt" 2>&1
echo "benchmark: exit $?, $((SECONDS - start)) s"
cat "$OUT/gemm.txt"
if [ "$SWEEP_S" -gt 0 ]; then
    timeout "$SWEEP_S" python -m benchmarks.kernels.quant_gemm --rows 64,512 --sweep \
        > "$OUT/sweep.txt" 2>&1
    echo "sweep: exit $?, $((SECONDS - start)) s"
    grep -qE "^best" "$OUT/sweep.txt" && grep -E "^best|Error" "$OUT/sweep.txt" | head -40 \
        || tail -30 "$OUT/sweep.txt"  # cut short: the shapes that finished
fi
