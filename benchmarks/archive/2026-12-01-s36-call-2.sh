#!/usr/bin/env bash
# Session 36's second device call (one H200; carry .llama-pack for write_random's vocabulary):
# a decode step at depth 0 in a cache of 256 slots (hearth_speed's tg128) against one of
# 32,768 (a chat in an app's context: the attention's splits sized from the capacity),
# 2026-11-30-s29-step-ab.py's graph replays, main, 2 rounds, a trace of 2 replays each.
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh c2
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
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q llama:$L; do
  name=${m%%:*}; file=${m#*:}
  for run in 256:paged-f16 32768:paged-f16 32768:kivi4/rot4; do
    slots=${run%%:*}; kv=${run#*:}; tag=$name-$slots-${kv/\//-}
    mkdir -p "$o/$tag"
    timeout $(cap 90 10) python3 $AB $file "$o/$tag" --rounds 2 --replays 2 --slots $slots \
      --kv $kv --variants main >"$o/$tag.txt" 2>&1
    since "$tag (exit $?)"; tail -1 "$o/$tag.txt" >>"$o/steps.txt"
  done
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
