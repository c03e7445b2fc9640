#!/usr/bin/env bash
# Session 23's fourth device call (one H200, a fresh machine; carry .llama-pack and .whl): main
# as it lands (the one-token expert down, the KV cache's sequences in kv_sequences.py, the batch
# context in its own module, the sinks' kivi4 chunks):
#   1. the GPU tests these touch: the one-token down's, the KV cache's, the batch's;
#   2. experts in RAM on a simulated 12 GiB card (benchmarks.moe_offload show: the planner's
#      placement beside llama-bench's --n-cpu-moe settings), the in-place reads now through
#      the one-token down (128 programs of 80 KB);
#   3. Qwen3-30B-A3B through the worker on the Hearth engine, three repetitions (the median
#      load: one after the first, whose kernels compile on the empty Triton cache);
#   4. the engine's GPU tests (tests/engine/hearth/test_gpu.py) with the time left.
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
export HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf"
HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -n 8 -v -p no:cacheprovider --timeout 140 -rfE \
  tests/kernels/test_moe_one_token.py tests/kernels/test_kv_cache.py tests/kernels/test_kv_cache_positions.py \
  tests/kernels/test_kv_batch_rows.py tests/kernels/test_kv_kivi.py tests/kernels/test_kv_page_step.py \
  tests/engine/hearth/test_gpu_batch.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; since written
mkdir -p "$o/offload"
timeout $(cap 130) python3 -m benchmarks.moe_offload show --model $Q --card 12 --out "$o/offload" --skip-cache \
  --hearth-timeout 60 >"$o/offload/show.txt" 2>&1
since "offload (exit $?)"; tail -15 "$o/offload/show.txt" >>"$o/steps.txt"
timeout $(cap 170) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $Q \
  --engine hearth --reps 3 --depth 0 --decode 128 --no-llama-bench >"$o/qwen3-worker.txt" 2>&1
since "qwen3 through the worker, 3 repetitions (exit $?)"; tail -12 "$o/qwen3-worker.txt" >>"$o/steps.txt"
HEARTH_GPU_TESTS=1 timeout $(cap 200 10) python3 -m pytest -n 8 -v -p no:cacheprovider --timeout 180 -rfE \
  tests/engine/hearth/test_gpu.py >"$o/tests-engine.txt" 2>&1
since "engine tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests-engine.txt" | tail -12 >>"$o/steps.txt"
since end
