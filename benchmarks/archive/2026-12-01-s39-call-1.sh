#!/usr/bin/env bash
# Session 39's first device call (one H200; carry .llama-pack and .whl): where one layer's
# kivi4/rot4 decode attention spends its time in a 32k cache. The attention probe
# (2026-12-01-s39-attention-depth.py) at depths 64, 8192 and 32768 of a cache of 32,832 slots,
# Qwen3-30B-A3B's shape (4 KV heads) and Llama-3-8B's (8), main beside the reduce merging all
# 132 splits in one step (chunk256) and fewer splits (per_sm=3); Nsight Compute on both kernels
# at 32k (Qwen3's shape); then the engine's Qwen3-30B-A3B step at 32k depth, traced.
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
P=benchmarks/archive/2026-12-01-s39-attention-depth.py
for h in 4 8; do
  timeout $(cap 120 200) python3 $P --kv-heads $h --depths 64 8192 32768 \
    --variants main chunk256 per_sm=3 >"$o/probe-$h.txt" 2>&1
  since "probe $h (exit $?)"; grep depth "$o/probe-$h.txt" >>"$o/steps.txt"
done
timeout $(cap 90 160) ncu --target-processes all -k regex:decode_ --launch-skip 8 --launch-count 4 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis \
  python3 $P --kv-heads 4 --depths 32768 --ncu >"$o/ncu.txt" 2>&1
since "ncu (exit $?)"
wait $writer; since written
mkdir -p "$o/qwen3-32k"
timeout $(cap 150 5) python3 benchmarks/archive/2026-11-30-s29-step-ab.py $Q "$o/qwen3-32k" \
  --rounds 1 --replays 2 --kv kivi4/rot4 --slots 32832 --depth 32768 --variants main \
  >"$o/qwen3-32k.txt" 2>&1
since "step (exit $?)"; tail -1 "$o/qwen3-32k.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
