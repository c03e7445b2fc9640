#!/usr/bin/env bash
# Session 39's fifth device call (one H200; carry .llama-pack, .whl and .s39-before, a copy of
# kernels/ before this session): main (rot4 V rotated back in each split program, the reduce
# merging 32 of a head's D values a program: call 4's join) on the GPU tests of the cache and
# kivi4; the tg128 step (256 slots, paged f16) before and after for Qwen3-30B-A3B and
# Llama-3-8B, each tree in its own process; then both beside llama-bench of the same build.
export DEADLINE_S=420
source benchmarks/gpu/call_prelude.sh c5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
TRITON_CACHE_DIR=/tmp/tc-now timeout $(cap 80 300) python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_kv_cache.py tests/kernels/test_kv_kivi.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q llama:$L; do
  for t in before:.s39-before now:; do
    name=${t%%:*}; dir=${t#*:}; tag=${m%%:*}-tg128-$name
    path=$PYTHONPATH; [ -n "$dir" ] && path=$PWD/$dir:$PYTHONPATH
    mkdir -p "$o/$tag"
    PYTHONPATH=$path TRITON_CACHE_DIR=/tmp/tc-$name timeout $(cap 40 110) python3 $AB ${m#*:} \
      "$o/$tag" --rounds 1 --replays 2 --variants main >"$o/$tag.txt" 2>&1
    since "step $tag (exit $?)"; tail -1 "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
  done
done
export TRITON_CACHE_DIR=/tmp/tc-now
for m in qwen3:$Q llama:$L; do
  name=${m%%:*}
  timeout $(cap 80 3) python3 -m benchmarks.hearth_speed ${m#*:} --llama-bench --tokens 128 \
    --kv kivi4/rot4 --json "$o/$name.json" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/$name.txt" | head -4 >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
