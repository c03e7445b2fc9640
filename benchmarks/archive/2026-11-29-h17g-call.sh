#!/usr/bin/env bash
# Session 17, branch h17g (issue 34): the MoE prefill grouped GEMM with the weight rows as the
# MMA's M side and the codes turned to f16 by byte permutes and f16x2 FMAs (_grouped_kernel),
# against the pairs-as-M kernel it replaces (HEARTH_GROUPED_GEMM=pairs_as_m), back to back.
# One H200, about 4 minutes at most (each step under `timeout`), from the repository root:
#     bash benchmarks/archive/2026-11-29-h17g-call.sh /tmp/oh17g
# 1. the grouped GEMM's GPU tests (the real shapes against the reference and the expert GEMV)
#    and its interpreter tests' file compiled for the GPU: every format through the assembly;
# 2. the kernel rows at 512 and 64 tokens (benchmarks/kernels/moe_prefill.py): Qwen3 Q4_K/Q6_K
#    and gpt-oss-20b MXFP4, both kernels at their defaults, ms, TFLOP/s, GB/s;
# 3. the Qwen3 chunk's profile (benchmarks/prefill_profile.py, --runs 8), new then old in one
#    process (--also-env): pp512 wall and the grouped kernel's share of the device time;
# 4. the sweep of _grouped_kernel's launch shapes at 512 tokens (which shape wins per case).
# Outputs in $1: steps.txt (the summary), tests.txt, kernel.txt/json, prefill-qwen3.txt,
# sweep.txt/json; prefill-gpt-oss.txt where time is left.
set -uo pipefail
o=${1:?output folder}
mkdir -p "$o"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
DEADLINE=${DEADLINE_S:-270}
left() { echo $((DEADLINE - (SECONDS - start))); }
cap() { local l; l=$(( $(left) - 5 )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
step() { echo "$1 after $((SECONDS - start)) s" | tee -a "$o/steps.txt"; }
# the tests' reference is gguf's dequantizer: from the bundle's wheel where it is not installed
if ! python3 -c "import gguf" 2>/dev/null; then
    wheel=$(ls .gpu-bundle/wheels/gguf-*.whl gguf-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python3 -m pip install -q --no-index --no-deps --target /tmp/site "$wheel" \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >>"$o/steps.txt" 2>&1
parallel=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
# 1. tests
timeout "$(cap "${TEST_S:-60}")" python3 -m pytest $parallel -q -p no:cacheprovider -rfEs \
    tests/kernels/test_moe_grouped_gemm_gpu.py tests/kernels/test_moe_grouped_gemm.py \
    >"$o/tests.txt" 2>&1
step "tests (exit $?)"
tail -4 "$o/tests.txt" | tee -a "$o/steps.txt"
# 2. kernel rows, both kernels at their default launch shapes
timeout "$(cap "${BENCH_S:-60}")" python3 -m benchmarks.kernels.moe_prefill --tokens 512,64 \
    --json "$o/kernel.json" >"$o/kernel.txt" 2>&1
step "kernel rows (exit $?)"
grep -E "GEMV|GEMM|gate\+up|down" "$o/kernel.txt" >>"$o/steps.txt"
# 3. the Qwen3 chunk: new, then old in the same process
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
profile() {  # name, model, seconds
    if [ ! -f "$2" ]; then step "$1: $2 missing (written by random_model, show_env.sh)"; return; fi
    timeout "$(cap "$3")" python3 -m benchmarks.prefill_profile "$2" --runs 8 \
        --also-env HEARTH_GROUPED_GEMM=pairs_as_m >"$o/prefill-$1.txt" 2>&1
    step "prefill $1 (exit $?)"
    grep -E "^median|^again|kernels by device|_grouped_kernel|_pairs_as_m_kernel" \
        "$o/prefill-$1.txt" >>"$o/steps.txt"
}
profile qwen3 "$Q" "${PROFILE_S:-100}"
# 4. the sweep of launch shapes (rows print as they are timed: a cut-short run keeps them)
timeout "$(cap "${SWEEP_S:-70}")" python3 -m benchmarks.kernels.moe_prefill --tokens 512 \
    --only-sweep --json "$o/sweep.json" >"$o/sweep.txt" 2>&1
step "sweep (exit $?)"
grep -E "sweep|Error" "$o/sweep.txt" >>"$o/steps.txt"
[ "$(left)" -gt 70 ] && profile gpt-oss "$G" 70
step done
