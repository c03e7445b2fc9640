#!/usr/bin/env bash
# Session 31's first device call (one H200; carry .llama-pack for write_random's vocabulary):
# one layer's kivi4/rot4 attention at 32k (the s30 probe) in pages of 64 (main), pages of 64
# read in two loop steps of 32 (sub=2: commit 1ce2cbd applied to the tree for this call) and
# pages of 32; then the engine's step, main against sub-2, at 32k for Qwen3-30B-A3B and
# Llama-3-8B (2026-11-30-s29-step-ab.py, alternately in one process).
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh o1
install_wheels
since installed
export TRITON_CACHE_DIR=/tmp/tc
P=benchmarks/archive/2026-11-30-s30-attention-probe.py
for round in 1 2; do
  for heads in 4 8; do
    timeout $(cap 60 10) python3 $P --kv-heads $heads --pair kivi4/rot4 --tunings default sub=2 \
      >"$o/probe-64-$heads-r$round.txt" 2>&1
    since "probe pages 64, $heads heads, round $round (exit $?)"; grep -v -i warn "$o/probe-64-$heads-r$round.txt" >>"$o/steps.txt"
    timeout $(cap 60 10) python3 $P --kv-heads $heads --pair kivi4/rot4 --page-size 32 --tunings default \
      >"$o/probe-32-$heads-r$round.txt" 2>&1
    since "probe pages 32, $heads heads, round $round (exit $?)"; grep -v -i warn "$o/probe-32-$heads-r$round.txt" >>"$o/steps.txt"
  done
done
ls -la /tmp/models >>"$o/steps.txt" 2>&1
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
mkdir -p "$o/qwen3-32k" "$o/llama-32k"
timeout $(cap 150 5) python3 $AB $Q "$o/qwen3-32k" --variants main sub-2 --rounds 2 \
  --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/qwen3-32k.txt" 2>&1
since "qwen3 32k (exit $?)"; grep '^{' "$o/qwen3-32k.txt" | cut -c1-120 >>"$o/steps.txt"
timeout $(cap 150 5) python3 $AB $L "$o/llama-32k" --variants main sub-2 --rounds 2 \
  --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/llama-32k.txt" 2>&1
since "llama 32k (exit $?)"; grep '^{' "$o/llama-32k.txt" | cut -c1-120 >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
