#!/usr/bin/env bash
# Session 24's second device call (one H200, a fresh machine; carry .llama-pack and .whl). Call 1
# measured the K/V row written by the attention's own launch (WRITE) with the head norms' sums in
# a fixed tree (tree_sums.tree_sum): Llama-3-8B's step 2.023 against 2.049 ms, but Qwen3's
# attention 12.2 us a layer against 3.2 + 2.8 and its pp512 halved (the tree in RoPE's launch).
# Here the norms' sums are tl.sum again (a dense model with head norms keeps the KV write's
# launch: attention_block.writes_in_attention), against the two launches
# (HEARTH_WRITE_IN_ATTENTION=0, for this A/B):
#   1. the GPU tests of what changed;
#   2. Qwen3-30B-A3B decode, two launches and one alternately, twice each, then beside
#      llama-bench (pp512 back to ~11,000?, tg128, 32k f16 and kivi4/rot4);
#   3. Llama-3-8B decode alternately, twice each (the spread of call 1's one pair);
#   4. gpt-oss-20b (biases, sinks, no head norms) alternately, then beside llama-bench.
source benchmarks/gpu/call_prelude.sh o2
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
  write_random gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf $G ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 130 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 120 -rfE \
  tests/kernels/test_kv_write_in_attention.py tests/kernels/test_kv_write_rope.py \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_paged_cache.py \
  tests/engine/hearth/test_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -14 >>"$o/steps.txt"
wait $writer; since written
ab() {  # ab NAME FILE RUNS: decode, the two launches and one alternately
  local run fused
  for run in $3; do
    for fused in 0 1; do
      HEARTH_WRITE_IN_ATTENTION=$fused timeout $(cap 75) python3 -m benchmarks.hearth_speed $2 \
        --kv paged-f16 --depth 0 --tokens 128 --profile --json "$o/$1-$fused$run.json" \
        >"$o/$1-$fused$run.txt" 2>&1
      since "$1 write_in_attention=$fused run $run (exit $?)"
      grep -h "tg128\|replays\|kv_write\|decode_split" "$o/$1-$fused$run.txt" >>"$o/steps.txt"
    done
  done
}
ab qwen3 $Q "a b"
timeout $(cap 90) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 beside llama-bench (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
ab llama8b $L "a b"
ab gpt-oss $G "a"
timeout $(cap 60) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss beside llama-bench (exit $?)"; grep -h "pp512\|tg128" "$o/gpt-oss.txt" >>"$o/steps.txt"
since end
