#!/usr/bin/env bash
# Session 36's fourth device call (one H200; carry .llama-pack and .whl): main beside
# llama-bench of the same build in the same call, `benchmarks.hearth_speed --llama-bench`
# (tg128, 32k depth with kivi4/rot4, pp512): Qwen3-30B-A3B and Llama-3-8B random Q4_K_M, the
# issues' figures last measured in sessions 30 and 32.
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
wait $writer; since written
for m in qwen3:$Q llama:$L; do
  name=${m%%:*}; file=${m#*:}
  timeout $(cap 240 10) python3 -m benchmarks.hearth_speed $file --llama-bench --tokens 128 \
    --kv kivi4/rot4 --json "$o/$name.json" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/$name.txt" | head -8 >>"$o/steps.txt"
done
since end
