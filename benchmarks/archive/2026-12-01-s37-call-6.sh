#!/usr/bin/env bash
# Session 37's sixth device call (one H200; carry .llama-pack and .whl): wo's launch stores
# the router's partial scores and takes no ticket (call 3's last-ticket sum and picks kept it
# 2.9 us past wo's own end); the norm sums them and picks the top k with their weights, and
# each gate/up program picks its own slot's expert before its wait. The kernel tests on CUDA;
# Qwen3-30B-A3B random Q4_K_M: main against the router's launch in one process (tg128 graph
# replays, 2 rounds, 4 eager steps' picks layer by layer against the router launch's on the
# same inputs); then main beside llama-bench of the same build (hearth_speed --llama-bench:
# tg128, 32k kivi4/rot4, pp512).
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c6
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150 400) python3 -m pytest -q -x -p no:cacheprovider \
  tests/kernels/test_router_beside_wo.py tests/kernels/test_moe_one_token.py \
  tests/kernels/test_norms_and_activations.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s37-beside-ab.py
mkdir -p "$o/qwen3"
timeout $(cap 150 250) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 --diagnose 4 \
  --variants main router-launch >"$o/qwen3.txt" 2>&1
since "ab (exit $?)"; tail -3 "$o/qwen3.txt" >>"$o/steps.txt"; grep "argmax\|layer_steps" "$o/qwen3.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
timeout $(cap 260 5) python3 -m benchmarks.hearth_speed $Q --llama-bench --tokens 128 \
  --kv kivi4/rot4 --json "$o/speed.json" >"$o/speed.txt" 2>&1
since "speed (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/speed.txt" | head -8 >>"$o/steps.txt"
since end
