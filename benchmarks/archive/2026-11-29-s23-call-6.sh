#!/usr/bin/env bash
# Session 23's sixth device call (one H200, a fresh machine; carry .llama-pack and .whl): main
# with experts read in place kept on the grouped down (call 5): the engine's and the one-token
# down's GPU tests, then the in-place placement once (call 5: 68.3-69.0 tok/s grouped).
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
export HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf"
HEARTH_GPU_TESTS=1 timeout 90 python3 -m pytest -n 8 -v -p no:cacheprovider --timeout 80 -rfE \
  tests/engine/hearth/test_gpu.py tests/kernels/test_moe_one_token.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; since written
timeout $(cap 60) python3 -m benchmarks.moe_offload hearth --model $Q --card 12 --ram-layers 21 --slots 0 \
  >"$o/in-place.json" 2>"$o/in-place.err"
since "in place (exit $?)"; cut -c1-400 "$o/in-place.json" >>"$o/steps.txt"
since end
