#!/usr/bin/env bash
# Session 26's fourth device call (one H200; carry .llama-pack and .whl): the fourth probe
# (benchmarks/archive/2026-11-30-s26-probe4.py): pinned memory of 4 KiB and 2 MiB pages
# and torch's, read in place beside ggml (call 3: in-place reads stop while ggml runs).
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
timeout $(cap 300) python3 benchmarks/archive/2026-11-30-s26-probe4.py "$o/probe4.json" \
  >"$o/probe4.txt" 2>&1
since "probe4 (exit $?)"; grep -v repack "$o/probe4.txt" | tail -20 >>"$o/steps.txt"
