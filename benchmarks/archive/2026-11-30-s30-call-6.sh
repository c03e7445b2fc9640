#!/usr/bin/env bash
# Session 30's sixth device call (one H200; carry .llama-pack): the GPU tests of kernels/ and
# of the Hearth engine on main as the session leaves it (kivi4 keys' scales even channels
# first, the open page in a split of its own).
export DEADLINE_S=330
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout $(cap 300 5) python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 200 -rfE \
  tests/kernels tests/engine/hearth >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -15 >>"$o/steps.txt"
since end
