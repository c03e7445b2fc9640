#!/usr/bin/env bash
# Session 22's fifth call (one H200; carry .llama-pack and .whl): kivi4 keys in the Hearth
# engine's batch (each sequence's open page in a slot of its own; write_rows writes each row
# into its slot and seals the pages they filled; the captured steps read the slots from a
# static copy). The kernels' kivi4 and batch-row tests, then the batch's GPU tests (20
# sequences together against each alone with kivi4/rot4, the captured step against the eager
# one over two steps that fill and seal pages, the decoder's steps launched ahead on a real
# vocabulary with kivi4 keys).
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -n 4 -q --tb=short -p no:cacheprovider --timeout 120 \
  -rfE tests/kernels/test_kv_kivi.py tests/kernels/test_kv_batch_rows.py >"$o/kernel-tests.txt" 2>&1
since "kernel tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/kernel-tests.txt" | tail -8 >>"$o/steps.txt"
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 200 python3 -m pytest -n 4 -v --tb=short -p no:cacheprovider --timeout 180 \
  -rfE tests/engine/hearth/test_gpu_batch.py >"$o/tests.txt" 2>&1
since "batch tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
since end
