#!/usr/bin/env bash
# Session 31's third device call (one H200; carry .whl; the tree of commit fa80206): the one-token FFN's kernel rows again
# after call 2's compile failure of the two launches (runs_in_8_bits' cache modifier as a
# default), with diagnostic shapes (moe_one_token_ffn.FfnShape's count_each: `done` counted
# per gate/up tile as in call 2, else once a program; probe 1: the gate/up tiles alone, probe
# 2: the down tiles without the wait for h), then the GPU tests of the expert kernels.
export DEADLINE_S=330
source benchmarks/gpu/call_prelude.sh o3
install_wheels
since installed
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150 10) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-launch \
  --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down" --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "kernel rows (exit $?)"; grep -v -i warn "$o/moe.txt" | tail -14 >>"$o/steps.txt"
HEARTH_GPU_TESTS=1 timeout $(cap 150 10) python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_moe_one_token_ffn.py tests/kernels/test_moe_one_token.py \
  tests/kernels/test_moe_gemv_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
since end
