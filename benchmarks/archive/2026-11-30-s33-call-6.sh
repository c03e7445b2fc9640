#!/usr/bin/env bash
# Session 33's sixth device call (one H200; carry .whl): the tests of the two kernels this session
# changed, on main's final code (the fifth call's suite ran out of time before them): the unpack
# at 64 programs a slot's tensor and the published sum.
export DEADLINE_S=150
source benchmarks/gpu/call_prelude.sh c6
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 120 5) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_expert_unpack.py \
  tests/kernels/test_host_published.py >$o/tests.txt 2>&1
since "tests (exit $?)"; tail -2 $o/tests.txt >>$o/steps.txt
