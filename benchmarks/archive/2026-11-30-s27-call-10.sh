#!/usr/bin/env bash
# Session 27's tenth device call (one H200; carry .llama-pack and .whl): call 9's experts in RAM
# again on another fresh machine (its host's CPU against its link decides the split's margin):
# benchmarks.moe_offload show, 12 GiB card, read in place and the split of 3 picks by the CPU,
# beside llama-bench's --n-cpu-moe settings.
source benchmarks/gpu/call_prelude.sh o10
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 200 5) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
  --skip-cpu --split-picks 3 --out "$o/offload" >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "tok/s\|x (the" "$o/offload.txt" | cut -c1-200 >>"$o/steps.txt"
