#!/usr/bin/env bash
# Session 25's sixth device call (one H200, a fresh machine; carry .whl): the expert GEMV's GPU
# tests at the real shapes, by name (calls 3-5 ran out of time with 49-63 passed, none failed):
# Qwen3-30B-A3B's and gpt-oss-20b's MoE FFN at 1 and 16 tokens against the reference, the downs'
# rounding of h, and the one-token down's tests.
DEADLINE_S=200 source benchmarks/gpu/call_prelude.sh o6
install_wheels
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 185 python3 -m pytest -n 16 -v -p no:cacheprovider --timeout 180 -rfE \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_one_token.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "PASSED|FAILED|ERROR| passed| failed" "$o/tests.txt" | sed 's/^\[gw[0-9]*\] //' | sort | tail -60 >>"$o/steps.txt"
since end
