#!/usr/bin/env bash
# Session 28's fifth device call (one H200; carry .llama-pack and .whl): the tree as submitted.
# The engine's GPU tests (the experts read one tensor at a time, staged experts, the kept
# Triton key); then the split of 3 picks at 20 layers in RAM with ggml's repacked copy made
# before the pinned ones (call 4: the split's repacked buffers got no huge pages), each variant
# of huge pages once (benchmarks/archive/2026-11-30-s28-huge-pages-ab.py, one round, picks 3).
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q &
writer=$!
HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -rfE \
  tests/kernels/test_compiler_warmup.py tests/engine/hearth/test_gpu.py \
  tests/engine/hearth/test_staged_experts.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)|passed|failed" "$o/tests.txt" | tail -20 >>"$o/steps.txt"
wait $writer; since written
export TRITON_CACHE_DIR=/tmp/tc
sed -i 's/for picks in (3, 8):/for picks in (3,):/' benchmarks/archive/2026-11-30-s28-huge-pages-ab.py
timeout $(cap 150 3) python3 benchmarks/archive/2026-11-30-s28-huge-pages-ab.py $Q "$o/huge-ab.json" 1 \
  >"$o/huge-ab.txt" 2>&1
since "huge pages a/b (exit $?)"; cut -c1-300 "$o/huge-ab.txt" >>"$o/steps.txt"
