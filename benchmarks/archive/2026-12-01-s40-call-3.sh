#!/usr/bin/env bash
# Session 40's third device call (one H200; carry .llama-pack and .whl), main at 827ead5 (the
# reduce's warps by its tile): the engine's step at 32k kivi4/rot4 with the split kernel at 4
# warps (at 5 and 3 stages) against main's 2, alternately in one process, for Qwen3-30B-A3B
# and Llama-3-8B; then both models beside llama-bench of the same build (hearth_speed).
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh c3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
since written
export TRITON_CACHE_DIR=/tmp/tc
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q llama:$L; do
  tag=${m%%:*}-32k; mkdir -p "$o/$tag"
  timeout $(cap 110 5) python3 $AB ${m#*:} "$o/$tag" --rounds 1 --replays 2 --kv kivi4/rot4 \
    --slots 32832 --depth 32768 --variants main split-4-warps split-4-warps-stages-3 \
    >"$o/$tag.txt" 2>&1
  since "step $tag (exit $?)"; grep "tok/s" "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
done
for m in qwen3:$Q llama:$L; do
  name=${m%%:*}
  timeout $(cap 130 3) python3 -m benchmarks.hearth_speed ${m#*:} --llama-bench --tokens 128 \
    --kv kivi4/rot4 --json "$o/$name.json" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/$name.txt" | head -4 >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
