#!/usr/bin/env bash
# Session 16, branch h16e (issue 34: the expert GEMV's share of the copy rate), one H200, about
# 2.5 minutes. Usage: bash benchmarks/archive/2026-11-29-h16e-call.sh OUT_DIR, from the
# repository root, after the call's environment is set up (torch + Triton 3.6, and gguf with
# MXFP4 importable for the tests' reference: 2026-11-29-s16-call-1.sh's /tmp/site on PYTHONPATH).
# Each step has its own time limit, so the call returns what the others printed.
#   1. The MoE kernels' GPU tests (compiled): the down's two ways to read h bit for bit (f32 and
#      f16, every format, the real shapes), MXFP4's byte-permute decode of every byte,
#      every format against the reference, the sm_90 compile without spills (Triton 3.6).
#   2. benchmarks.kernels.moe at Qwen3-30B-A3B's and gpt-oss-20b's shapes, 1, 4, 16 tokens:
#      the defaults, the 4-row shape every mode had (the down's former default), and at one
#      token each case's SHORTLIST; GB/s beside the copy rate; the BEST lines are the
#      default-config table to set in kernels/moe_gemv.default_config.
set -uo pipefail
o=${1:?usage: $0 OUT_DIR}
mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  >"$o/versions.txt" 2>&1
HEARTH_GPU_TESTS=1 timeout 90 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_compiles.py \
  tests/kernels/test_moe_gemv.py -k "gpu or compiles or rounds_h or router_gemv or \
  selected_and_grouped or mxfp4 or down_sums or every_format or split_rows or default_config" \
  >"$o/tests.txt" 2>&1
echo "kernel tests: exit $?" >>"$o/steps.txt"; tail -6 "$o/tests.txt" >>"$o/steps.txt"
since tests
cases="qwen3-30b-a3b gate+up,qwen3-30b-a3b down,gpt-oss-20b gate+up,gpt-oss-20b down"
timeout 120 python3 -m benchmarks.kernels.moe --tokens 1,4,16 --cases "$cases" --sweep \
  --sweep-tokens 1 --kernels-only --json "$o/moe.json" >"$o/moe.txt" 2>&1
echo "benchmark: exit $?" >>"$o/steps.txt"
since benchmark
grep -E "^device|BEST|failed" "$o/moe.txt" >>"$o/steps.txt"
cat "$o/steps.txt"
