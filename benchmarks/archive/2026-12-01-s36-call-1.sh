#!/usr/bin/env bash
# Session 36's first device call (one H200; carry .llama-pack for write_random's vocabulary):
# upper bounds for fewer launches a layer (benchmarks/archive/2026-12-01-s36-ablate-ab.py),
# main against a launch taken out, alternately in one process, tg128 graph replays, 2 rounds:
#   Qwen3-30B-A3B: the router off the path; the attention norm left out; both.
#   Llama-3-8B: the attention norm left out; both norms left out.
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s36-ablate-ab.py
mkdir -p "$o/qwen3" "$o/llama"
timeout $(cap 260 120) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 \
  --variants main no-router no-attn-norm no-router-no-attn-norm >"$o/qwen3.txt" 2>&1
since "qwen3 (exit $?)"; tail -4 "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 150 10) python3 $AB $L "$o/llama" --rounds 2 --replays 2 \
  --variants main no-attn-norm no-norms >"$o/llama.txt" 2>&1
since "llama (exit $?)"; tail -3 "$o/llama.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
