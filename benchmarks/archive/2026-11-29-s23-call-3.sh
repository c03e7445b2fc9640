#!/usr/bin/env bash
# Session 23's third device call (one H200, a fresh machine; carry .llama-pack and .whl). Call 2
# measured the one-token expert GEMV (kernels/moe_one_token.py) against the grouped kernel at
# one token: its gate/up lost at every shape (12.3-18.3 us against 9.5), its down won at 16
# rows of 8 slots with 8 warps (9.59 against 11.07 us) and lost at the narrower shapes; the
# decode step with both at the first shapes lost (2.307 against 2.087 ms). Here the down alone
# at 16 x 8 (gate/up grouped), against the grouped down (HEARTH_MOE_ONE_TOKEN=0, for this A/B):
#   1. the GPU tests (the one-token down's, the expert GEMV's, the engine's);
#   2. the kernel rows at one token (benchmarks.kernels.moe --one-token);
#   3. Qwen3-30B-A3B decode, grouped and one-token alternately, twice each (the spread), then
#      with llama-bench beside at 0 and 32k (f16, kivi4/rot4) and pp512.
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 220 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 200 -rfE \
  tests/kernels/test_moe_one_token.py tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_gemv.py \
  tests/engine/hearth/test_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
timeout $(cap 60) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-token \
  --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down" --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "moe rows (exit $?)"; grep -h "^qwen3\|ONE-TOKEN" "$o/moe.txt" >>"$o/steps.txt"
wait $writer; since written
for run in a b; do
  for one in 0 1; do
    HEARTH_MOE_ONE_TOKEN=$one timeout $(cap 60) python3 -m benchmarks.hearth_speed $Q --kv paged-f16 --depth 0 \
      --tokens 128 --profile --json "$o/qwen3-$one$run.json" >"$o/qwen3-$one$run.txt" 2>&1
    since "qwen3 one_token=$one run $run (exit $?)"
    grep -h "tg128\|replays\|_expert_kernel\|_one_token" "$o/qwen3-$one$run.txt" >>"$o/steps.txt"
  done
done
timeout $(cap 130) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 beside llama-bench (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
since end
