#!/usr/bin/env bash
# Session 38's sixth device call (one H200; carry .llama-pack and .whl): main is
# kernels/moe_down_dp4a.py's down (commit 41e4df6). The GPU tests that call 5's cap cut
# short; Qwen3-30B-A3B random Q4_K_M in one process: main against the gate/up letting the
# next launch in at its programs' start (early) and the step before (slots), tg128 2 rounds,
# and main against slots at 32k kivi4/rot4; then main beside llama-bench of the same build.
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c6
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 200 350) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_gemv_gpu.py \
  tests/kernels/test_norms_and_activations.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s38-down-ab.py
mkdir -p "$o/qwen3" "$o/qwen3-32k"
timeout $(cap 120 200) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 \
  --variants main early slots >"$o/qwen3.txt" 2>&1
since "ab (exit $?)"; tail -3 "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 100 120) python3 $AB $Q "$o/qwen3-32k" --rounds 1 --replays 2 --kv kivi4/rot4 \
  --slots 32832 --depth 32768 --variants main slots >"$o/qwen3-32k.txt" 2>&1
since "ab 32k (exit $?)"; tail -2 "$o/qwen3-32k.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
timeout $(cap 260 5) python3 -m benchmarks.hearth_speed $Q --llama-bench --tokens 128 \
  --kv kivi4/rot4 --json "$o/speed.json" >"$o/speed.txt" 2>&1
since "speed (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/speed.txt" | head -8 >>"$o/steps.txt"
since end
