#!/usr/bin/env bash
# Session 28's second device call (one H200; carry .llama-pack and .whl): call 1's steps after
# its build, which failed there (pip refused gguf's wheel named twice). The GPU tests of what
# changed (Triton's kept cache key against Triton 3.6's own, the experts read one tensor at a
# time, the uploader); the load with Triton's key kept against hashed in every process, beside
# llama.cpp, cold and warm page cache (benchmarks/archive/2026-11-30-s28-load-ab.py, 3 rounds).
source benchmarks/gpu/call_prelude.sh o2
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L &
writer=$!
HEARTH_GPU_TESTS=1 timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -rfE \
  tests/kernels/test_compiler_warmup.py tests/engine/hearth/test_upload.py \
  tests/engine/hearth/test_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)|passed|failed" "$o/tests.txt" | tail -20 >>"$o/steps.txt"
wait $writer; since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 300 3) python3 benchmarks/archive/2026-11-30-s28-load-ab.py $L "$o/load-ab.json" 3 \
  >"$o/load-ab.txt" 2>&1
since "load a/b (exit $?)"; tail -9 "$o/load-ab.txt" >>"$o/steps.txt"
