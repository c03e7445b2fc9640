#!/usr/bin/env bash
# Session 37's fifth device call (one H200; carry .llama-pack and .whl): call 4 found the
# step routed beside wo deterministic (graph, eager, with and without dependent launches: the
# same logits) and 13.5% off the router launch's at the first step; here also the router's
# GEMV after the norm's own launch (the y main's experts read: rms_norm_quantized's), to see
# whether a random model's 48 layers amplify the norms' float differences that much.
export DEADLINE_S=400
source benchmarks/gpu/call_prelude.sh c5
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
