#!/usr/bin/env bash
# Session 26's second device call (one H200; carry .llama-pack and .whl): the second probe
# (benchmarks/archive/2026-11-30-s26-probe2.py): which resource serialized the forked host node
# and in-place reads of call 1.
source benchmarks/gpu/call_prelude.sh o2
install_wheels
llama_from_pack
since unpacked
timeout $(cap 300) python3 benchmarks/archive/2026-11-30-s26-probe2.py "$o/probe2.json" \
  >"$o/probe2.txt" 2>&1
since "probe2 (exit $?)"; grep -v repack "$o/probe2.txt" | tail -20 >>"$o/steps.txt"
