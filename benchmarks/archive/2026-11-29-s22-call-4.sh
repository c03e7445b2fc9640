#!/usr/bin/env bash
# Session 22's fourth call (one H200; carry .llama-pack and .whl): the batch's GPU tests with a
# mixture-of-experts model (tiny qwen3moe) added: 20 sequences together against each alone,
# a captured decode step against the eager one, a step with prompt chunks in parts against one
# eager pass. Call 3 served Qwen3-30B-A3B on the Hearth engine; these say its batch computes
# what each sequence alone does before Best fit is given those figures.
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 240 python3 -m pytest -n 4 -v --tb=short -p no:cacheprovider --timeout 200 \
  -rfE tests/engine/hearth/test_gpu_batch.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
since end
