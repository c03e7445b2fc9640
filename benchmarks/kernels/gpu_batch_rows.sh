#!/usr/bin/env bash
# One device call for a batch's matrix paths (docs/decisions/0022-batch-rows-by-dequantized-gemm.md):
# the integer GEMV's GPU tests and test_gpu_batch.py (a 20-row batch step through KernelsOps),
# then the benchmark rows (python -m benchmarks.kernels.batch_rows: the float GEMV, the integer
# GEMV and dequantize + torch's GEMM at 1..512 rows, with the thresholds they give the engine).
# Each step has its own time limit, so the call returns what the others printed. OUT: where the
# outputs go (tests.txt, rows.txt, rows.json).
set -o pipefail
: "${OUT:?set OUT}" "${TEST_S:=70}" "${BENCH_S:=90}"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the tests' reference is gguf's dequantizer: from the bundle's wheel where it is not installed
if ! python -c "import gguf" 2>/dev/null; then
    wheel=$(ls .gpu-bundle/wheels/gguf-*.whl gguf-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python -m pip install -q --no-index --no-deps --target /tmp/site "$wheel" \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
start=$SECONDS
timeout "$TEST_S" python -m pytest tests/kernels/test_gemv_dp4a.py \
    tests/engine/hearth/test_gpu_batch.py -q -p no:cacheprovider -rs > "$OUT/tests.txt" 2>&1
echo "tests: exit $?, $((SECONDS - start)) s"
tail -6 "$OUT/tests.txt"
timeout "$BENCH_S" python -m benchmarks.kernels.batch_rows --json "$OUT/rows.json" \
    > "$OUT/rows.txt" 2>&1
echo "benchmark: exit $?, $((SECONDS - start)) s"
cat "$OUT/rows.txt"
