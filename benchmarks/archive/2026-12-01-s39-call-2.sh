#!/usr/bin/env bash
# Session 39's second device call (one H200; carry .llama-pack, .whl and .s39-before, a copy of
# kernels/ before this change): rot4 V rotated back in each split program and the reduce
# merging 32 of a head's D values a program, against the kernels before it. The attention
# probe at depths 64 and 32768 (cache of 32,832 slots), Qwen3-30B-A3B's and Llama-3-8B's
# shapes, before (PYTHONPATH=.s39-before) and after, with the reduce's share of D and its
# warps and the split's stages varied; the attention's GPU tests; the engine's Qwen3-30B-A3B
# step at 32k depth before and after (separate processes, one after the other).
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh c2
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
P=benchmarks/archive/2026-12-01-s39-attention-depth.py
for h in 4 8; do
  PYTHONPATH=$PWD/.s39-before:$PYTHONPATH TRITON_CACHE_DIR=/tmp/tc-before timeout $(cap 60 300) \
    python3 $P --kv-heads $h --depths 64 32768 --variants main >"$o/before-$h.txt" 2>&1
  since "before $h (exit $?)"; grep depth "$o/before-$h.txt" >>"$o/steps.txt"
  timeout $(cap 100 240) python3 $P --kv-heads $h --depths 64 32768 --variants main dc=64 \
    dc=128 reduce_warps=2 reduce_warps=8 stages=4 stages=6 >"$o/after-$h.txt" 2>&1
  since "after $h (exit $?)"; grep depth "$o/after-$h.txt" >>"$o/steps.txt"
done
timeout $(cap 150 150) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_kv_cache.py \
  tests/kernels/test_kv_page_step.py tests/kernels/test_kv_kivi.py \
  tests/kernels/test_grouped_attention.py tests/kernels/test_kv_cache_positions.py \
  tests/kernels/test_kv_write_in_attention.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for tree in before after; do
  mkdir -p "$o/qwen3-32k-$tree"
  path=$PYTHONPATH; cache=/tmp/tc
  [ $tree = before ] && path=$PWD/.s39-before:$PYTHONPATH && cache=/tmp/tc-before
  PYTHONPATH=$path TRITON_CACHE_DIR=$cache timeout $(cap 80 5) python3 $AB $Q \
    "$o/qwen3-32k-$tree" --rounds 1 --replays 2 --kv kivi4/rot4 --slots 32832 --depth 32768 \
    --variants main >"$o/qwen3-32k-$tree.txt" 2>&1
  since "step $tree (exit $?)"; tail -1 "$o/qwen3-32k-$tree.txt" >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
