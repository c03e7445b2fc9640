#!/usr/bin/env bash
# Session 40's fourth device call (one H200; carry .llama-pack and .whl): a decode step's K/V
# row written by the attention's launch with kivi4 keys too (the open page sealed after the
# attention): its GPU tests, with the attention's and the cache's; Llama-3-8B's step at 32k
# kivi4/rot4 against the write's own launch (write-apart), alternately in one process; then
# both models beside llama-bench of the same build.
export DEADLINE_S=560
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
timeout $(cap 150 300) python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_kv_write_in_attention.py tests/engine/hearth/test_paged_cache.py \
  tests/kernels/test_kv_kivi.py tests/kernels/test_kv_page_step.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
tag=llama-32k; mkdir -p "$o/$tag"
timeout $(cap 110 5) python3 $AB $L "$o/$tag" --rounds 2 --replays 2 --kv kivi4/rot4 \
  --slots 32832 --depth 32768 --variants main write-apart >"$o/$tag.txt" 2>&1
since "step $tag (exit $?)"; grep "tok/s" "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
for m in llama:$L qwen3:$Q; do
  name=${m%%:*}
  timeout $(cap 130 3) python3 -m benchmarks.hearth_speed ${m#*:} --llama-bench --tokens 128 \
    --kv kivi4/rot4 --json "$o/$name.json" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/$name.txt" | head -4 >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
