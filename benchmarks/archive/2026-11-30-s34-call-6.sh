#!/usr/bin/env bash
# Session 34's sixth device call (one H200, a fresh machine; carry .llama-pack and .whl): the
# final tree, Qwen3-30B-A3B on a simulated 12 GiB card with the split's share tuned (split 3
# planned), three rounds beside llama-bench --n-cpu-moe 18, 20 (medians compared).
export DEADLINE_S=280
source benchmarks/gpu/call_prelude.sh c6
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
timeout $(cap 240 5) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 --rounds 3 \
  --out "$o/tuned" >"$o/tuned.txt" 2>&1
since "tuned (exit $?)"; grep -h "Hearth engine\|llama-bench tg\|best Hearth" "$o/tuned.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
since end
