#!/usr/bin/env bash
# Session 28's third device call (one H200; carry .llama-pack and .whl): experts in RAM with the
# expert tensors read one at a time at load (the planner's load transient 0.37 -> 0.24 GiB):
# Qwen3-30B-A3B on a simulated 12 GiB card (benchmarks.moe_offload show: the planner's count of
# layers in RAM read in place and split 3 of 8, llama-bench's --n-cpu-moe settings), then the
# split at 21 layers (the count before) on the same machine (hearth mode, no hog: speed only),
# and llama-bench at --n-cpu-moe 18 again at 16 and 8 threads (its spread between calls).
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
lscpu > "$o/cpu.txt" 2>&1; cat /sys/devices/system/node/node*/cpulist >> "$o/cpu.txt" 2>&1
grep -i huge /proc/meminfo >> "$o/cpu.txt"; cat /sys/kernel/mm/transparent_hugepage/enabled >> "$o/cpu.txt" 2>&1
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 330 120) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
  --skip-cpu --split-picks 3 --out "$o/offload" >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "chose\|tok/s\|x (the" "$o/offload.txt" | cut -c1-220 >>"$o/steps.txt"
timeout $(cap 70 50) python3 -m benchmarks.moe_offload hearth --model $Q --ram-layers 21 --cpu-picks 3 \
  >"$o/split21.json" 2>"$o/split21.err"
since "split at 21 layers (exit $?)"; cut -c1-400 "$o/split21.json" >>"$o/steps.txt"
for t in 16 8; do
  timeout $(cap 25 3) llama-bench -m $Q -p 0 -n 128 -r 3 -fa 1 -ngl 99 -ncmoe 18 -t $t -o json \
    >"$o/llama18-t$t.json" 2>"$o/llama18-t$t.err"
  since "llama-bench -ncmoe 18 -t $t (exit $?)"; grep -h '"avg_ts"\|samples_ts' -A0 "$o/llama18-t$t.json" >>"$o/steps.txt"
done
