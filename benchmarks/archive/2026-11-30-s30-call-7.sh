#!/usr/bin/env bash
# Session 30's seventh device call (one H200; the session's last seconds): call 6's suite ran
# out of time with three failures unnamed; here the paged cache's tests (kivi4 pairs among
# them) and the two modules known to fail on a GPU host without Triton's interpreter
# (session 28), with their names.
export DEADLINE_S=110
source benchmarks/gpu/call_prelude.sh o7
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout $(cap 100 3) python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 90 -rfE \
  tests/kernels/test_kv_cache.py tests/kernels/test_kv_cache_positions.py \
  tests/engine/hearth/test_staged_experts.py tests/engine/hearth/test_cpu_experts.py \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -10 >>"$o/steps.txt"
