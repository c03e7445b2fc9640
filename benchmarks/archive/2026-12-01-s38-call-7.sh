#!/usr/bin/env bash
# Session 38's seventh device call (one H200; carry .llama-pack and .whl): main now lets the
# down in as each one-token gate/up program starts, where the down is moe_down_dp4a.py's
# (expert_gate_up's `then`). Its kernel tests on CUDA; Qwen3-30B-A3B random Q4_K_M, tg128 in
# one process: main against late (call 6's main) and slots (the step before the session);
# then main beside llama-bench of the same build.
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c7
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 70 230) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_down_dp4a.py \
  "tests/kernels/test_moe_gemv_gpu.py::test_qwen3_moe_ffn" >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s38-down-ab.py
mkdir -p "$o/qwen3"
timeout $(cap 90 90) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 \
  --variants main late slots >"$o/qwen3.txt" 2>&1
since "ab (exit $?)"; tail -3 "$o/qwen3.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
timeout $(cap 100 5) python3 -m benchmarks.hearth_speed $Q --llama-bench --tokens 128 \
  --kv kivi4/rot4 --json "$o/speed.json" >"$o/speed.txt" 2>&1
since "speed (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/speed.txt" | head -8 >>"$o/steps.txt"
since end
