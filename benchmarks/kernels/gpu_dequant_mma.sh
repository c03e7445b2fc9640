#!/usr/bin/env bash
# One device call for the dequantizing MMA GEMM (kernels/dequant_mma.py): its tests on the GPU
# (the interpreter tests' files with the gpu-marked Llama-3-8B shapes, the inline assembly
# against the plain path, and the sm_90 compile check), the batch's GPU tests with the MMA
# forced for every row count of Q4_K and Q6_K (HEARTH_DEQUANT_MMA_ROWS: 20 sequences together
# against each alone, a step replayed from its CUDA graph against the eager one), then the
# benchmark at 2..64 rows beside dequantize + torch and the integer GEMV (at one row too), then
# the launch shapes alone (--sweep --mma-only) at 16 and 64 rows. Prints the winner per (shape,
# rows), the ROWS_WON table it gives and what 2-8 rows cost against one. Each step has its own
# time limit (about 4 minutes in all). OUT: where the outputs go (tests.txt, engine.txt,
# rows.txt, rows.json, sweep.txt, sweep.json).
set -o pipefail
: "${OUT:?set OUT}" "${TEST_S:=60}" "${ENGINE_S:=45}" "${BENCH_S:=75}" "${SWEEP_S:=75}"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the tests' reference is gguf's dequantizer: from the bundle's wheel where it is not installed
if ! python -c "import gguf" 2>/dev/null; then
    wheel=$(ls .gpu-bundle/wheels/gguf-*.whl gguf-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python -m pip install -q --no-index --no-deps --target /tmp/site "$wheel" \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
start=$SECONDS
timeout "$TEST_S" python -m pytest tests/kernels/test_dequant_mma.py tests/kernels/test_nibbles.py \
    tests/kernels/test_dequant_mma_compiles.py -q -p no:cacheprovider -rs > "$OUT/tests.txt" 2>&1
echo "tests: exit $?, $((SECONDS - start)) s"
tail -6 "$OUT/tests.txt"
HEARTH_DEQUANT_MMA_ROWS=Q4_K:2-64,Q6_K:2-64 timeout "$ENGINE_S" python -m pytest \
    tests/engine/hearth/test_gpu_batch.py -q -p no:cacheprovider -rfE > "$OUT/engine.txt" 2>&1
echo "batch tests with the MMA forced: exit $?, $((SECONDS - start)) s"
tail -4 "$OUT/engine.txt"
timeout "$BENCH_S" python -m benchmarks.kernels.dequant_mma --rows 2,4,8,9,16,24,32,48,64 \
    --json "$OUT/rows.json" > "$OUT/rows.txt" 2>&1
echo "benchmark: exit $?, $((SECONDS - start)) s"
sed -n '/^winner/,$p' "$OUT/rows.txt" | grep -q . && sed -n '/^winner/,$p' "$OUT/rows.txt" \
    || tail -40 "$OUT/rows.txt"  # cut short: the shapes that finished
if [ "$SWEEP_S" -gt 0 ]; then
    timeout "$SWEEP_S" python -m benchmarks.kernels.dequant_mma --rows 16,64 --sweep --mma-only \
        --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
    echo "sweep: exit $?, $((SECONDS - start)) s"
    sed -n '/^winner/,$p' "$OUT/sweep.txt" | grep -q . && sed -n '/^winner/,$p' "$OUT/sweep.txt" \
        || tail -30 "$OUT/sweep.txt"
    grep -E "Error" "$OUT/sweep.txt" | head -10
fi
