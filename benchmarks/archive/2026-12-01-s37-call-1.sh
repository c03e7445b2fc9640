#!/usr/bin/env bash
# Session 37's first device call (one H200; carry .llama-pack and .whl): routing beside wo on
# the GPU. The kernel tests of the new path on CUDA (while the model is written), then
# Qwen3-30B-A3B random Q4_K_M: the step routed beside wo (main) against the router's launch,
# alternately in one process (2026-12-01-s37-beside-ab.py: tg128 graph replays, 2 rounds, and
# 48 teacher-forced steps of both compared).
export DEADLINE_S=570
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 200 300) python3 -m pytest -q -x -p no:cacheprovider \
  tests/kernels/test_router_beside_wo.py tests/kernels/test_moe_one_token.py \
  tests/kernels/test_norms_and_activations.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s37-beside-ab.py
mkdir -p "$o/qwen3"
timeout $(cap 300 10) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 --check 48 \
  --variants main router-launch >"$o/qwen3.txt" 2>&1
since "qwen3 (exit $?)"; tail -4 "$o/qwen3.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
