#!/usr/bin/env bash
# Session 38's second device call (one H200; carry .llama-pack and .whl): call 1 showed the
# one-token expert down taking 8.5 us a layer with its weights already in L2, so its time is
# its work after the wait. Qwen3-30B-A3B random Q4_K_M, tg128 graph replays in one process:
# main (every down program rounds all 8 slots' h to 8 bits) against h rounded once by its own
# launch and the down reading it, at six launch shapes.
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c2
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
AB=benchmarks/archive/2026-12-01-s38-down-ab.py
mkdir -p "$o/qwen3"
timeout $(cap 300 60) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 \
  --variants main q8-16x8 q8-8x8 q8-8x4 q8-4x4 q8-4x2 q8-2x2 >"$o/qwen3.txt" 2>&1
since "ab (exit $?)"; tail -8 "$o/qwen3.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
