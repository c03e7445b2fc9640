#!/usr/bin/env bash
# Session 38's fifth device call (one H200; carry .llama-pack and .whl): kernels/
# moe_down_dp4a.py's down is expert_down's default for a one-token step (two chunks of
# super-blocks, 4 rows x 4 warps, h rounded by a dependent launch). The GPU tests of the
# changed kernels; Qwen3-30B-A3B random Q4_K_M, tg128 graph replays in one process: main
# against the one-token slots down (the step before) and four launch shapes; then main beside
# llama-bench of the same build (hearth_speed --llama-bench: tg128, 32k kivi4/rot4, pp512).
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150 400) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_down_dp4a.py \
  tests/kernels/test_moe_one_token.py tests/kernels/test_moe_gemv_gpu.py \
  tests/kernels/test_norms_and_activations.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
timeout $(cap 100 380) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-token \
  --cases "qwen3-30b-a3b down" >"$o/moe.txt" 2>&1
since "moe bench (exit $?)"; grep ONE-TOKEN "$o/moe.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s38-down-ab.py
mkdir -p "$o/qwen3"
timeout $(cap 200 200) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 \
  --variants main slots d-2x2 d-4x2 d-8x4 d-8x8 >"$o/qwen3.txt" 2>&1
since "ab (exit $?)"; tail -6 "$o/qwen3.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
timeout $(cap 260 5) python3 -m benchmarks.hearth_speed $Q --llama-bench --tokens 128 \
  --kv kivi4/rot4 --json "$o/speed.json" >"$o/speed.txt" 2>&1
since "speed (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/speed.txt" | head -8 >>"$o/steps.txt"
since end
