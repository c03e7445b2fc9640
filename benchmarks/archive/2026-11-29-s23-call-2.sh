#!/usr/bin/env bash
# Session 23's second device call (one H200, a fresh machine; carry .llama-pack and .whl): the
# one-token expert GEMV (kernels/moe_one_token.py: a decode step's k experts in one program
# each, no grouping, no tickets), against the grouped kernel it replaces at one token
# (HEARTH_MOE_ONE_TOKEN=0 switches it off for the A/B; deleted with the loser):
#   1. its GPU tests, the expert GEMV's, and the engine's GPU tests (tiny qwen3moe among them);
#   2. the kernel rows at one token: Qwen3-30B-A3B's gate+up and down, the grouped kernel's
#      default beside the one-token kernel's launch shapes (benchmarks.kernels.moe --one-token);
#   3. Qwen3-30B-A3B decode without, then with it (the latter with llama-bench beside, f16 and
#      kivi4/rot4 at 32k, pp512 and the step's profile);
#   4. Qwen3 through the worker once more on the now filled Triton cache (call 1's two
#      repetitions gave the median of an empty-cache load and a warm one).
source benchmarks/gpu/call_prelude.sh o2
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 140 -rfE \
  tests/kernels/test_moe_one_token.py tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_gemv.py \
  tests/engine/hearth/test_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
timeout $(cap 100) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-token \
  --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down" --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "moe rows (exit $?)"; grep -h "^qwen3\|ONE-TOKEN" "$o/moe.txt" >>"$o/steps.txt"
wait $writer; since written
HEARTH_MOE_ONE_TOKEN=0 timeout $(cap 70) python3 -m benchmarks.hearth_speed $Q --kv paged-f16 --depth 0 \
  --tokens 128 --profile --json "$o/qwen3-grouped.json" >"$o/qwen3-grouped.txt" 2>&1
since "qwen3 grouped (exit $?)"; grep -h "tg128\|replays\|_expert_kernel\|_one_token" "$o/qwen3-grouped.txt" >>"$o/steps.txt"
timeout $(cap 130) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --profile --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 one-token (exit $?)"; grep -h "pp512\|tg128\|depth\|replays\|_expert_kernel\|_one_token" "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 120) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $Q \
  --engine both --reps 1 --depth 0 --decode 128 --no-llama-bench >"$o/qwen3-worker.txt" 2>&1
since "qwen3 through the worker, warm cache (exit $?)"; tail -14 "$o/qwen3-worker.txt" >>"$o/steps.txt"
since end
