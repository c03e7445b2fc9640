#!/usr/bin/env bash
# Prepared at the end of session 22, run in session 23 (one H200; carry .llama-pack and .whl):
#   0. the batch's GPU tests, beside the Qwen3 file's writing: kivi4 keys in the batch landed
#      in session 22 with its test of 20 sequences against each alone changed after the device
#      time was spent (every row through the one-row GEMV on both sides: call 5 measured 2.9%
#      on the sequence that sealed a page with the GEMM's rows);
#   1. Qwen3-30B-A3B through the worker on both engines, two repetitions (session 21 ran one
#      on an empty Triton cache: load 64.2 s against 3.4 s, first prefill 0.59x, decode 1.62x;
#      the second load and prefill say what a user meets after the first).
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 200 python3 -m pytest -n 4 -v --tb=short -p no:cacheprovider --timeout 180 \
  -rfE tests/engine/hearth/test_gpu_batch.py >"$o/tests.txt" 2>&1
since "batch tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; since written
timeout $(cap 420) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $Q \
  --engine both --reps 2 --depth 0 --decode 128 --no-llama-bench >"$o/qwen3-worker.txt" 2>&1
since "qwen3 through the worker (exit $?)"; tail -14 "$o/qwen3-worker.txt" >>"$o/steps.txt"
since end
