#!/usr/bin/env bash
# Session 35's fourth device call (one H200; carry .llama-pack and .whl): experts in RAM on a
# simulated 16 GiB card (the planner's count of layers in RAM, split 3 planned and tuned at
# load), two rounds beside llama-bench at the settings around llama.cpp's planned --n-cpu-moe
# and all 48; then one round on a simulated 12 GiB card beside -ncmoe 18, 20.
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
OFF="--model $Q --skip-cache --skip-cpu --skip-in-place --split-picks 3"
timeout $(cap 300 5) python3 -m benchmarks.moe_offload show $OFF --card 16 --rounds 2 \
  --out "$o/card16" >"$o/card16.txt" 2>&1
since "card16 (exit $?)"; grep -h "planner\|Hearth engine\|llama-bench tg\|best Hearth" "$o/card16.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
timeout $(cap 120 5) python3 -m benchmarks.moe_offload show $OFF --card 12 --ncmoe 18,20 \
  --out "$o/card12" >"$o/card12.txt" 2>&1
since "card12 (exit $?)"; grep -h "Hearth engine\|llama-bench tg\|best Hearth" "$o/card12.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
since end
