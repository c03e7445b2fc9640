#!/usr/bin/env bash
# Session 29's ninth device call (one H200; carry .llama-pack), with the session's last device
# seconds: Llama-3-8B's FFN norm launched after wo's GEMV ends (main) against as its dependent
# (ffn-norm-dependent: calls 2-8), alternately in one process, tg128, 3 rounds
# (benchmarks/archive/2026-11-30-s29-step-ab.py).
export DEADLINE_S=80
source benchmarks/gpu/call_prelude.sh o9
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
since written
export TRITON_CACHE_DIR=/tmp/tc
mkdir -p "$o/llama"
timeout $(cap 40 3) python3 benchmarks/archive/2026-11-30-s29-step-ab.py $L "$o/llama" \
  --variants main ffn-norm-dependent --rounds 3 --replays 2 >"$o/llama.txt" 2>&1
since "llama tg (exit $?)"; tail -2 "$o/llama.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
