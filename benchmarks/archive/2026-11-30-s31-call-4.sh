#!/usr/bin/env bash
# Session 31's fourth device call (one H200; carry .llama-pack and .whl): experts in RAM against
# llama.cpp over three rounds (issue 34's 1.2x, left undecided by llama-bench's spread between
# calls): Qwen3-30B-A3B on a simulated 12 GiB card, `benchmarks.moe_offload show --rounds 3`
# (the planner's layers in RAM read in place and split 3 of 8; llama-bench's --n-cpu-moe
# settings around its plan; medians of each, run in turn), as session 28's call 3 ran it once.
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 480 10) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
  --skip-cpu --split-picks 3 --rounds 3 --out "$o/offload" >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "round\|chose\|tok/s\|x (the" "$o/offload.txt" | cut -c1-220 >>"$o/steps.txt"
since end
