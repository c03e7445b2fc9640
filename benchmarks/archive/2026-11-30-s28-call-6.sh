#!/usr/bin/env bash
# Session 28's sixth device call (one H200; carry .llama-pack and .whl): the uploader's first
# 512 MiB handed to the kernel's read-ahead at its start, while the CUDA context is made, against
# none, beside llama.cpp (benchmarks/archive/2026-11-30-s28-advice-ab.py: Llama-3-8B Q4_K_M,
# cold 3 rounds, warm 2); the uploader's tests on the GPU.
DEADLINE_S=285
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L &
writer=$!
HEARTH_GPU_TESTS=1 timeout 40 python3 -m pytest -q -p no:cacheprovider tests/engine/hearth/test_upload.py \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -1 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 250 3) python3 benchmarks/archive/2026-11-30-s28-advice-ab.py $L "$o/advice-ab.json" 3 2 \
  >"$o/advice-ab.txt" 2>&1
since "advice a/b (exit $?)"; tail -9 "$o/advice-ab.txt" >>"$o/steps.txt"
