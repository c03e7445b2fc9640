#!/usr/bin/env bash
# Session 27's fourth device call (one H200; carry .llama-pack and .whl): probe 8 (probe 7 with one copy a pick), the GPU's
# picks copied by the copy engine while ggml computes the CPU's, a layer at a time
# (benchmarks/archive/2026-11-30-s27-probe8.py).
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
timeout 300 python3 benchmarks/archive/2026-11-30-s27-probe8.py "$o/probe8.json" 2>&1 \
  | grep -v repack >"$o/probe8.txt"
since "probe8 (exit $?)"; cat "$o/probe8.txt" >>"$o/steps.txt"
