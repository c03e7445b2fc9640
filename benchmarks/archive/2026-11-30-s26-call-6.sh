#!/usr/bin/env bash
# Session 26's sixth device call (one H200; carry .llama-pack and .whl): the uploader's reads of
# 32 MiB (main) against 8 MiB (before) and two other shapes, each load in a fresh process from
# a cold and a warm page cache beside llama.cpp's (benchmarks/archive/2026-11-30-s26-load-ab.py),
# then a profile of the first token after a load (...-s26-first-token-profile.py).
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 330) python3 benchmarks/archive/2026-11-30-s26-load-ab.py $L "$o/load-ab.json" 3 \
  >"$o/load-ab.txt" 2>&1
since "load a/b (exit $?)"; tail -12 "$o/load-ab.txt" >>"$o/steps.txt"
timeout $(cap 60) python3 benchmarks/archive/2026-11-30-s26-first-token-profile.py $L \
  "$o/first-token.txt" >>"$o/steps.txt" 2>&1
since "first token profile (exit $?)"
