#!/usr/bin/env bash
# One device call for the integer MMA GEMM (kernels/quant_mma.py): its tests (the interpreter
# tests' file run on the GPU, with the gpu-marked Llama-3-8B shapes against the integer GEMV,
# and the sm_90 compile check), then the benchmark rows (python -m benchmarks.kernels.quant_mma:
# dequantize + torch's GEMM, the integer GEMV and the MMA at 8..64 rows), then the MMA's launch
# shapes (--sweep) at 16 and 64 rows on attn_q/o and ffn_down. Each step has its own time limit
# (about 5 minutes in all), so the call returns what the others printed. OUT: where the outputs
# go (tests.txt, mma.txt, mma.json, sweep.txt).
set -o pipefail
: "${OUT:?set OUT}" "${TEST_S:=100}" "${BENCH_S:=120}" "${SWEEP_S:=120}"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the tests' reference is gguf's dequantizer: from the bundle's wheel where it is not installed
if ! python -c "import gguf" 2>/dev/null; then
    wheel=$(ls .gpu-bundle/wheels/gguf-*.whl gguf-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python -m pip install -q --no-index --no-deps --target /tmp/site "$wheel" \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
start=$SECONDS
timeout "$TEST_S" python -m pytest tests/kernels/test_quant_mma.py \
    tests/kernels/test_quant_mma_compiles.py -q -p no:cacheprovider -rs > "$OUT/tests.txt" 2>&1
echo "tests: exit $?, $((SECONDS - start)) s"
tail -6 "$OUT/tests.txt"
timeout "$BENCH_S" python -m benchmarks.kernels.quant_mma --rows 8,16,32,64 \
    --json "$OUT/mma.json" > "$OUT/mma.txt" 2>&1
echo "benchmark: exit $?, $((SECONDS - start)) s"
cat "$OUT/mma.txt"
if [ "$SWEEP_S" -gt 0 ]; then
    timeout "$SWEEP_S" python -m benchmarks.kernels.quant_mma --rows 16,64 --sweep \
        --shapes attn_q,ffn_down > "$OUT/sweep.txt" 2>&1
    echo "sweep: exit $?, $((SECONDS - start)) s"
    grep -qE "^best" "$OUT/sweep.txt" && grep -E "^best|Error" "$OUT/sweep.txt" | head -40 \
        || tail -30 "$OUT/sweep.txt"  # cut short: the shapes that finished
fi
