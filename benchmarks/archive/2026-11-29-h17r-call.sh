#!/usr/bin/env bash
# h17r (issue 38): the integer GEMV with a batch's 2-16 decode rows in one program
# (kernels/gemv_dp4a_rows.py) against a program per row, beside the dequantizing MMA. Run from
# the repository root, on one H200, in the session's call environment (torch 2.11 + Triton
# 3.6); $1: the output folder. About 3 minutes (each step capped: 100, 120, 90 s).
#   tests.txt   the rows kernel on the GPU (its interpreter tests plus Llama-3-8B's attn_q and
#               ffn_down at 2, 4, 7, 8, 16 rows against the program-per-row kernel), the
#               integer GEMV's own tests and rows_alike, the batch's GPU tests (a captured
#               decode step of 2-8 rows now takes the rows kernel)
#   rows.txt    benchmarks.kernels.gemv_rows at 1, 2, 4, 8, 16 rows, Q4_K and Q6_K, the four
#               8B shapes: per-row GEMV (old) / rows GEMV (new) / dequant MMA, GB/s and the
#               fraction of the copy rate; the layer lines and where the rows GEMV beats the MMA
#   sweep.txt   the rows GEMV's tiles (SWEEP) at 4 and 16 rows: which default_rows_config
#               should take
# The engine's switch back to a program per row, HEARTH_GEMV_ROWS_IN_PROGRAM=0, is for the
# lead's serving measurement (benchmarks at 1/4/16/64 clients, old against new), not run here.
set -uo pipefail
o=${1:?usage: $0 OUTPUT_FOLDER}
mkdir -p "$o"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the tests' reference is gguf's dequantizer: from the bundle's wheel where it is not installed
if ! python3 -c "import gguf" 2>/dev/null; then
  wheel=$(ls .gpu-bundle/wheels/gguf-*.whl .whl/gguf-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site "$wheel" \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
T="HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE"
env $T tests/kernels/test_gemv_dp4a_rows.py tests/kernels/test_gemv_rows_alike.py \
  tests/kernels/test_gemv_dp4a.py tests/engine/hearth/test_gpu_batch.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
timeout 120 python3 -m benchmarks.kernels.gemv_rows --rows 1,2,4,8,16 --json "$o/rows.json" \
  >"$o/rows.txt" 2>&1
since "rows benchmark (exit $?)"
timeout 90 python3 -m benchmarks.kernels.gemv_rows --rows 4,16 --sweep \
  --json "$o/sweep.json" >"$o/sweep.txt" 2>&1
since "rows sweep (exit $?)"
