#!/usr/bin/env bash
# One device call for the integer GEMV (docs/kernels.md): the batch-1 variants' timings first
# (printed as measured, so a call cut by its limit keeps them), then the GPU tests of the
# variants kept. OUT: where the outputs go. BENCH_S / TEST_S: each part's time limit.
# NAMES: --variant-names for the timings (default: every variant).
set -o pipefail
: "${OUT:?set OUT}" "${BENCH_S:=130}" "${TEST_S:=90}"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
    | tee -a "$OUT/gpu.txt"
timeout "$BENCH_S" python -m benchmarks.kernels --variants ${NAMES:+--variant-names "$NAMES"} \
    --json "$OUT/variants.json" 2>&1 | tee "$OUT/variants.txt"
timeout "$TEST_S" python -m pytest tests/kernels/test_gemv_dp4a.py -q -p no:cacheprovider \
    -k "${TESTS:-llama3_8b_shapes or dp4a_assembly or counters}" 2>&1 | tail -40 \
    | tee "$OUT/tests.txt"
# ncu of the default on the 14336x4096 matrices (PROFILE=0: skip)
if [ "${PROFILE:-1}" != 0 ] && command -v ncu >/dev/null; then
    for fmt in Q4_K Q6_K; do
        timeout "${PROFILE_S:-40}" ncu -k regex:dp4a_gemv --launch-skip 5 -c 1 \
            --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
            --section LaunchStats --section WarpStateStats --section SchedulerStats \
            python -m benchmarks.kernels.gemv_profile "$fmt" 14336 4096 2>&1 \
            | tee "$OUT/ncu-$fmt.txt" | tail -60
    done
fi
