#!/usr/bin/env bash
# Session 27's third device call (one H200; carry .llama-pack and .whl): probe 7, the GPU's
# picks copied by the copy engine while ggml computes the CPU's, a layer at a time
# (benchmarks/archive/2026-11-30-s27-probe7.py).
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
timeout 300 python3 benchmarks/archive/2026-11-30-s27-probe7.py "$o/probe7.json" 2>&1 \
  | grep -v repack >"$o/probe7.txt"
since "probe7 (exit $?)"; cat "$o/probe7.txt" >>"$o/steps.txt"
