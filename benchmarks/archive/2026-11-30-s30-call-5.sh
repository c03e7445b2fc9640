#!/usr/bin/env bash
# Session 30's fifth device call (one H200; carry .llama-pack): Llama-3-8B's FFN norm launched
# after wo's GEMV ends (main) against as its dependent (ffn-norm-dependent: main before this
# call), alternately in one process (benchmarks/archive/2026-11-30-s29-step-ab.py): tg128 (paged
# f16, 3 rounds) and 32k (kivi4/rot4, 2 rounds).
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
since written
export TRITON_CACHE_DIR=/tmp/tc
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
mkdir -p "$o/llama" "$o/llama-32k"
timeout $(cap 90 5) python3 $AB $L "$o/llama" --variants main ffn-norm-dependent --rounds 3 \
  >"$o/llama.txt" 2>&1
since "llama tg (exit $?)"; tail -3 "$o/llama.txt" >>"$o/steps.txt"
timeout $(cap 120 5) python3 $AB $L "$o/llama-32k" --variants main ffn-norm-dependent --rounds 2 \
  --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/llama-32k.txt" 2>&1
since "llama 32k (exit $?)"; tail -3 "$o/llama-32k.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
