#!/usr/bin/env bash
# Session 32's sixth device call (one H200; carry .llama-pack and .whl): main's final engine
# code under the GPU tests that touch it: the Hearth engine's GPU tests (test_gpu.py: the
# split's graph pieces among them), the one-token down's, the staged experts', ggml's experts'
# and the huge pages'.
export DEADLINE_S=150
source benchmarks/gpu/call_prelude.sh c6
install_wheels
llama_from_pack
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout $(cap 135 5) python3 -m pytest -n 8 -q -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu.py tests/kernels/test_moe_one_token.py \
  tests/engine/hearth/test_staged_experts.py tests/engine/hearth/test_cpu_experts.py \
  tests/engine/hearth/test_host_pages.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -8 >>"$o/steps.txt"
since end
