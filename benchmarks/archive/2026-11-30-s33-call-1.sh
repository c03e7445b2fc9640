#!/usr/bin/env bash
# Session 33's first device call (one H200; carry .llama-pack and .whl): experts in RAM,
# Qwen3-30B-A3B, 20 layers' experts in RAM, split 3 of 8: four decode steps traced
# (2026-11-30-s33-trace-split.py: where each pause's time goes), then split 2 and 4 traced too.
export DEADLINE_S=400
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
T=benchmarks/archive/2026-11-30-s33-trace-split.py
for c in 3 4; do
  mkdir -p $o/split-$c
  timeout $(cap 120 10) python3 $T $Q $o/split-$c --cpu-picks $c >$o/split-$c.txt 2>&1
  since "split $c (exit $?)"
  gzip -f $o/split-$c/split.trace.json
done
since end
