#!/usr/bin/env bash
# Session 33's fourth device call (one H200; carry .llama-pack and .whl): the staged experts'
# unpack at 8, 16, 32 and 64 programs a slot's tensor (benchmarks.kernels.expert_unpack), then
# experts in RAM on main (the next piece launched by the copier): Qwen3-30B-A3B on a simulated
# 12 GiB card, split 3 of 8, three rounds in turn with llama-bench --n-cpu-moe 18 and 20.
export DEADLINE_S=420
source benchmarks/gpu/call_prelude.sh c4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 60 10) python3 -m benchmarks.kernels.expert_unpack --splits 8,16,32,64 >$o/unpack.txt 2>&1
since "unpack (exit $?)"; grep "slots" $o/unpack.txt >>$o/steps.txt
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
timeout $(cap 330 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 --rounds 3 \
  --out "$o/show" >"$o/show.txt" 2>&1
since "show (exit $?)"; grep -h "Hearth engine\|llama-bench tg\|best\|ratio" "$o/show.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-600 >>"$o/steps.txt"
since end
