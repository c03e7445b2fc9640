#!/usr/bin/env bash
# Session 26's first device call (one H200; carry .llama-pack and .whl): the split placement's
# probe (benchmarks/archive/2026-11-30-s26-probe.py): ggml's experts per pick and per call on
# this host, beside pinned copies, and as host nodes in a CUDA graph beside in-place reads.
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
nproc >"$o/host.txt"; lscpu >>"$o/host.txt" 2>&1; free -g >>"$o/host.txt"
timeout $(cap 400) python3 benchmarks/archive/2026-11-30-s26-probe.py "$o/probe.json" \
  >"$o/probe.txt" 2>&1
since "probe (exit $?)"; tail -15 "$o/probe.txt" >>"$o/steps.txt"
