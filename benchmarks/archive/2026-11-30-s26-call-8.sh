#!/usr/bin/env bash
# Session 26's eighth device call (one H200; carry .llama-pack and .whl): main's load (Triton's
# setup started in the background with the kernels' operations and waited for at the load's
# end) against the same tree with that warm-up off, each load in a fresh process from a cold
# and a warm page cache, beside llama.cpp's (benchmarks/archive/2026-11-30-s26-load-ab2.py,
# 3 rounds each); the uploader's and the warm-up's tests on the GPU.
source benchmarks/gpu/call_prelude.sh o8
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L &
writer=$!
HEARTH_GPU_TESTS=1 timeout 60 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/hearth/test_upload.py tests/kernels/test_compiler_warmup.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -2 "$o/tests.txt" >>"$o/steps.txt"
wait $writer
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 330) python3 benchmarks/archive/2026-11-30-s26-load-ab2.py $L "$o/load-ab2.json" 3 \
  >"$o/load-ab2.txt" 2>&1
since "load a/b (exit $?)"; tail -6 "$o/load-ab2.txt" >>"$o/steps.txt"
