#!/usr/bin/env bash
# Session 27's eleventh device call (one H200; carry .whl): the unpack kernel's benchmark row
# (benchmarks.kernels.expert_unpack: kernels/expert_unpack.py against its torch reference).
source benchmarks/gpu/call_prelude.sh o11
install_wheels
timeout 120 python3 -m benchmarks.kernels.expert_unpack >"$o/unpack.txt" 2>&1
since "unpack (exit $?)"; cat "$o/unpack.txt" >>"$o/steps.txt"
