#!/usr/bin/env bash
# Session 37's fourth device call (one H200; carry .llama-pack and .whl): call 3's step routed
# beside wo picked the router launch's experts in every layer of 4 eager steps, yet its graph's
# logits differed from the router launch's graph; here 24 teacher-forced steps run every way
# (graph or eager, dependent launches on or off, either routing) against the router's launch
# in a graph (2026-12-01-s37-beside-ab.py --check), Qwen3-30B-A3B random Q4_K_M.
export DEADLINE_S=400
source benchmarks/gpu/call_prelude.sh c4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
AB=benchmarks/archive/2026-12-01-s37-beside-ab.py
mkdir -p "$o/qwen3"
timeout $(cap 300 10) python3 $AB $Q "$o/qwen3" --rounds 1 --replays 1 --check 24 \
  --variants main >"$o/qwen3.txt" 2>&1
since "check (exit $?)"; grep "argmax" "$o/qwen3.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
