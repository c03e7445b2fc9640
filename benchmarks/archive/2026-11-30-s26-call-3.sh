#!/usr/bin/env bash
# Session 26's third device call (one H200; carry .llama-pack and .whl): the third probe
# (benchmarks/archive/2026-11-30-s26-probe3.py): ggml thread counts against the forked in-place reads
# (call 2: ggml and reads of pinned memory do not overlap).
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
timeout $(cap 300) python3 benchmarks/archive/2026-11-30-s26-probe3.py "$o/probe3.json" \
  >"$o/probe3.txt" 2>&1
since "probe3 (exit $?)"; grep -v repack "$o/probe3.txt" | tail -20 >>"$o/steps.txt"
