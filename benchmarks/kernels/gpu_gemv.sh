#!/usr/bin/env bash
# One device call for the integer GEMV (docs/kernels.md, session 8): every kernel compiled in
# parallel first (benchmarks.kernels.gemv_sweep --warm), then the GPU tests of every candidate
# and the default (each may become a default), then the sweep, PASSES times over (each shape:
# the default, the candidates, the default again; the copy rate measured at the start), then
# ncu of the default beside NCU_CANDIDATE on 4096x4096. Each step has its own time limit, so
# the call returns what the others printed. OUT: where the outputs go (6 files).
# S9=1 (session 9): only session 9's kernels (the defaults with L2 prefetch, the mixed Q4_K +
# Q6_K launch): their GPU tests and the defaults', the sweep `--session9` (the engine's Q+K
# then V beside the mixed launch, then each shape's default, candidates, default again); no ncu.
set -o pipefail
: "${OUT:?set OUT}" "${WARM_S:=60}" "${TEST_S:=60}" "${SWEEP_S:=110}" "${PASSES:=3}"
S9_ARGS=() TEST_FILES=(tests/kernels/test_gemv_dp4a.py)
if [ "${S9:-0}" = 1 ]; then
    S9_ARGS=(--session9) TEST_FILES+=(tests/kernels/test_gemv_mixed.py) PROFILE=0
    : "${TESTS:=mixed or (sweep_candidates_at_llama3_8b_shapes and default) or dp4a_assembly or l2_spans}"
fi
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
    | tee -a "$OUT/gpu.txt"
# the tests' reference is gguf's dequantizer: a gguf wheel in the tree is installed into this
# python (session 8's call installed it with a bare `pip` and its 93 reference-needing tests
# failed in 7 s, their errors cut by `tail`: now the whole output is kept)
for wheel in gguf-*.whl; do
    [ -e "$wheel" ] && python -m pip install -q --no-deps "$wheel" 2>&1 | grep -v "as the 'root'"
done
python -c "import gguf" 2>&1 | tail -1 | sed 's/^/import gguf: /' | tee -a "$OUT/gpu.txt"
start=$SECONDS
timeout "$WARM_S" python -m benchmarks.kernels.gemv_sweep --warm 12 "${S9_ARGS[@]}" \
    > "$OUT/warm.txt" 2>&1
echo "warm: $((SECONDS - start)) s, $(grep -c '^warm' "$OUT/warm.txt") kernels" \
    | tee -a "$OUT/gpu.txt"
timeout "$TEST_S" python -m pytest "${TEST_FILES[@]}" -q -p no:cacheprovider \
    -k "${TESTS:-sweep_candidates_at_llama3_8b_shapes or dp4a_assembly}" > "$OUT/tests.txt" 2>&1
tail -5 "$OUT/tests.txt"
echo "tests done: $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
timeout "$SWEEP_S" python -m benchmarks.kernels.gemv_sweep --passes "$PASSES" "${S9_ARGS[@]}" \
    ${SHAPES:+--shapes "$SHAPES"} --json "$OUT/sweep.json" > "$OUT/sweep.txt" 2>&1
echo "sweep done: $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
tail -5 "$OUT/sweep.txt"
if [ "${PROFILE:-1}" != 0 ] && command -v ncu >/dev/null; then
    for candidate in "" "${NCU_CANDIDATE:-rit 4x16 w2 r72}"; do
        echo "=== Q4_K 4096x4096 ${candidate:-default}" >> "$OUT/ncu.txt"
        timeout "${PROFILE_S:-20}" ncu -k regex:dp4a_gemv --launch-skip 5 -c 1 \
            --section SpeedOfLight --section Occupancy --section LaunchStats \
            --section WarpStateStats python -m benchmarks.kernels.gemv_profile Q4_K 4096 4096 \
            ${candidate:+"$candidate"} >> "$OUT/ncu.txt" 2>&1
    done
    echo "ncu done: $((SECONDS - start)) s" | tee -a "$OUT/gpu.txt"
fi
