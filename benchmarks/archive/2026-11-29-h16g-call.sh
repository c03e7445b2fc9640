#!/usr/bin/env bash
# Session 16, branch h16g (issue 38): the dequantizing MMA after its wgmma serialization fix
# (d and dmin loaded in the iteration that uses them: ptxas's C7515 gone under Triton 3.6, the
# f16 tile no longer through shared memory) with default_config taking the last sweep's winners.
# One H200, about 2.5 minutes, from the repository root:
#     bash benchmarks/archive/2026-11-29-h16g-call.sh /tmp/oh16g
# 1. its GPU tests (kernels, inline assembly, the sm_90 compile check) and the batch's GPU tests
#    with the MMA forced at 2-64 rows of both formats (HEARTH_DEQUANT_MMA_ROWS): the MMA's
#    16-row tile at 2-8 rows in the engine, against each sequence alone and the eager step;
# 2. the rows 2, 4, 8, 9, 16, 32, 64 (and the integer GEMV at one row) at Llama-3-8B's shapes,
#    new defaults: the winner per (shape, rows), the ROWS_WON line, the rows 2-8 verdict;
# 3. the widened sweep of launch shapes at 16 and 64 rows, the MMA alone (which shape wins).
# Outputs in $1: tests.txt, rows.txt/json, sweep.txt/json, steps.txt (the summary).
set -uo pipefail
o=${1:?output folder}
mkdir -p "$o"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
step() { echo "$1 after $((SECONDS - start)) s" | tee -a "$o/steps.txt"; }
# the tests' reference is gguf's dequantizer: from the bundle's wheel where it is not installed
if ! python3 -c "import gguf" 2>/dev/null; then
    wheel=$(ls .gpu-bundle/wheels/gguf-*.whl gguf-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site "$wheel" \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >>"$o/steps.txt" 2>&1
parallel=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
HEARTH_DEQUANT_MMA_ROWS=Q4_K:2-64,Q6_K:2-64 timeout "${TEST_S:-60}" python3 -m pytest $parallel \
    -q -p no:cacheprovider -rfEs tests/kernels/test_dequant_mma.py tests/kernels/test_nibbles.py \
    tests/kernels/test_dequant_mma_compiles.py tests/engine/hearth/test_gpu_batch.py \
    >"$o/tests.txt" 2>&1
step "tests (exit $?)"
tail -4 "$o/tests.txt" | tee -a "$o/steps.txt"
timeout "${ROWS_S:-55}" python3 -m benchmarks.kernels.dequant_mma --rows 2,4,8,9,16,32,64 \
    --json "$o/rows.json" >"$o/rows.txt" 2>&1
step "rows (exit $?)"
sed -n '/^winner/,$p' "$o/rows.txt" | grep -q . && sed -n '/^winner/,$p' "$o/rows.txt" >>"$o/steps.txt" \
    || tail -30 "$o/rows.txt" >>"$o/steps.txt"  # cut short: the shapes that finished
timeout "${SWEEP_S:-50}" python3 -m benchmarks.kernels.dequant_mma --rows 16,64 --sweep --mma-only \
    --json "$o/sweep.json" >"$o/sweep.txt" 2>&1
step "sweep (exit $?)"
sed -n '/^winner/,$p' "$o/sweep.txt" | grep -q . && sed -n '/^winner/,$p' "$o/sweep.txt" >>"$o/steps.txt" \
    || tail -30 "$o/sweep.txt" >>"$o/steps.txt"
grep -E "Error" "$o/sweep.txt" "$o/rows.txt" | head -10 >>"$o/steps.txt"
grep -E "ROWS_WON|verdict" "$o/rows.txt"
step done
