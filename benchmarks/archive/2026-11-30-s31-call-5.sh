#!/usr/bin/env bash
# Session 31's fifth device call (one H200; carry .llama-pack and .whl): the GPU tests of
# kernels/ and the Hearth engine on main, each result printed as it ends (-v), so that a
# failure is named even if the call's time runs out (session 30's call 6 ran out at 94% with
# 3 failures unnamed).
export DEADLINE_S=585
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout $(cap 560 5) python3 -m pytest -n 16 -v -p no:cacheprovider --timeout 240 -rfE \
  tests/kernels tests/engine/hearth >"$o/tests.txt" 2>&1
since "tests (exit $?)"
grep -cE " PASSED " "$o/tests.txt" | sed 's/^/passed so far: /' >>"$o/steps.txt"
grep -cE " SKIPPED " "$o/tests.txt" | sed 's/^/skipped so far: /' >>"$o/steps.txt"
grep -E " (FAILED|ERROR) |^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | sort -u | tail -30 >>"$o/steps.txt"
since end
