#!/usr/bin/env bash
# Session 38's first device call (one H200; carry .llama-pack and .whl): weights brought into
# L2 ahead of the kernels that read them (kernels/l2_prefetch.py). The GPU tests of the
# changed kernels; Qwen3-30B-A3B random Q4_K_M: main (the gate/up brings the down's picked
# experts into L2, the down the next layer's attention projections) against the gate/up's
# prefetch alone and neither, in one process (tg128 graph replays, 2 rounds; at 32k kivi4/rot4
# main against neither); then main beside llama-bench of the same build (hearth_speed
# --llama-bench: tg128, 32k kivi4/rot4, pp512).
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150 400) python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_moe_gemv_gpu.py::test_qwen3_moe_ffn tests/kernels/test_router_beside_wo.py \
  tests/kernels/test_moe_one_token.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
timeout $(cap 60 380) python3 -m benchmarks.kernels.router --beside >"$o/router.txt" 2>&1
since "router bench (exit $?)"
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s38-prefetch-ab.py
mkdir -p "$o/qwen3" "$o/qwen3-32k"
timeout $(cap 150 250) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 \
  --variants main no-after none >"$o/qwen3.txt" 2>&1
since "ab (exit $?)"; tail -4 "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 150 200) python3 $AB $Q "$o/qwen3-32k" --rounds 1 --replays 2 --kv kivi4/rot4 \
  --slots 32832 --depth 32768 --variants main none >"$o/qwen3-32k.txt" 2>&1
since "ab 32k (exit $?)"; tail -3 "$o/qwen3-32k.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
timeout $(cap 260 5) python3 -m benchmarks.hearth_speed $Q --llama-bench --tokens 128 \
  --kv kivi4/rot4 --json "$o/speed.json" >"$o/speed.txt" 2>&1
since "speed (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/speed.txt" | head -8 >>"$o/steps.txt"
since end
