#!/usr/bin/env bash
# Session 40's first device call (one H200; carry .llama-pack and .whl): the attention's GPU
# tests on main (the cache, kivi4, the page steps, the K/V row written in the attention, the
# launch); then the engine's step at 32k depth (kivi4/rot4) with the reduce at 2 warps and the
# split kernel at 4 and 6 pipeline stages against main, alternately in one process, for
# Qwen3-30B-A3B and Llama-3-8B; then the tg128 step (256 slots) main against the reduce at 2
# warps.
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150 300) python3 -m pytest -q -p no:cacheprovider -x \
  tests/kernels/test_decode_launch.py tests/kernels/test_kv_cache.py \
  tests/kernels/test_kv_cache_positions.py tests/kernels/test_kv_kivi.py \
  tests/kernels/test_kv_page_step.py tests/kernels/test_kv_write_in_attention.py \
  tests/kernels/test_grouped_attention.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q llama:$L; do
  tag=${m%%:*}-32k; mkdir -p "$o/$tag"
  timeout $(cap 130 5) python3 $AB ${m#*:} "$o/$tag" --rounds 1 --replays 2 --kv kivi4/rot4 \
    --slots 32832 --depth 32768 --variants main reduce-2-warps stages-4 stages-6 \
    >"$o/$tag.txt" 2>&1
  since "step $tag (exit $?)"; grep "tok/s" "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
done
for m in qwen3:$Q llama:$L; do
  tag=${m%%:*}-tg128; mkdir -p "$o/$tag"
  timeout $(cap 60 5) python3 $AB ${m#*:} "$o/$tag" --rounds 2 --replays 2 \
    --variants main reduce-2-warps >"$o/$tag.txt" 2>&1
  since "step $tag (exit $?)"; grep "tok/s" "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
