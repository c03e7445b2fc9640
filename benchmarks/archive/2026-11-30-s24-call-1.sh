#!/usr/bin/env bash
# Session 24's first device call (one H200, a fresh machine; carry .llama-pack and .whl). A
# decode step's K/V row written by the attention's own launch (decode_attention.py's WRITE,
# PagedKVCache.attend(step_row=...)) in place of the KV write's launch before it, against that
# launch (HEARTH_WRITE_IN_ATTENTION=0, for this A/B):
#   1. the GPU tests of what changed (the fused write's bits against the two launches; a
#      speculative check against decode steps in the paged cache; the engine's);
#   2. Qwen3-30B-A3B decode, two launches and one alternately, twice each, then the one-launch
#      form beside llama-bench (pp512, tg128, 32k f16 and kivi4/rot4);
#   3. Llama-3-8B decode the same way (issue 35), beside llama-bench;
#   4. the experts of 21 layers read in place on a 12 GiB card (session 23's marked weights,
#      not yet run on a GPU).
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 140 -rfE \
  tests/kernels/test_kv_write_in_attention.py tests/kernels/test_kv_write_rope.py \
  tests/kernels/test_kv_cache_positions.py tests/kernels/test_moe_one_token.py \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_paged_cache.py \
  tests/engine/hearth/test_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -14 >>"$o/steps.txt"
wait $writer; since written
for run in a b; do
  for fused in 0 1; do
    HEARTH_WRITE_IN_ATTENTION=$fused timeout $(cap 60) python3 -m benchmarks.hearth_speed $Q \
      --kv paged-f16 --depth 0 --tokens 128 --profile --json "$o/qwen3-$fused$run.json" \
      >"$o/qwen3-$fused$run.txt" 2>&1
    since "qwen3 write_in_attention=$fused run $run (exit $?)"
    grep -h "tg128\|replays\|kv_write\|decode_split" "$o/qwen3-$fused$run.txt" >>"$o/steps.txt"
  done
done
timeout $(cap 90) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 beside llama-bench (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
for fused in 0 1; do
  HEARTH_WRITE_IN_ATTENTION=$fused timeout $(cap 60) python3 -m benchmarks.hearth_speed $L \
    --kv paged-f16 --depth 0 --tokens 128 --profile --json "$o/llama8b-$fused.json" \
    >"$o/llama8b-$fused.txt" 2>&1
  since "llama 8b write_in_attention=$fused (exit $?)"
  grep -h "tg128\|replays\|kv_write\|decode_split" "$o/llama8b-$fused.txt" >>"$o/steps.txt"
done
timeout $(cap 70) python3 -m benchmarks.hearth_speed $L --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --json "$o/llama8b.json" >"$o/llama8b.txt" 2>&1
since "llama 8b beside llama-bench (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/llama8b.txt" >>"$o/steps.txt"
timeout $(cap 90) python3 -m benchmarks.moe_offload hearth --model $Q --card 12 --ram-layers 21 \
  --slots 0 >"$o/in-place.json" 2>"$o/in-place.err"
since "in place (exit $?)"; cut -c1-400 "$o/in-place.json" >>"$o/steps.txt"
since end
