#!/usr/bin/env bash
# Session 38's third device call (one H200; carry .llama-pack and .whl): call 2 showed the
# one-token down no faster with h rounded once (so its time is its dot products at 8 warps an
# SM). Qwen3-30B-A3B random Q4_K_M, tg128 graph replays in one process: main against
# kernels/moe_down_dp4a.py's down (the dense integer GEMV's arithmetic over the k experts'
# rows side by side, h rounded once by its own launch) at five launch shapes; its GPU test.
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 120 400) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_moe_down_dp4a.py \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-12-01-s38-down-ab.py
mkdir -p "$o/qwen3"
timeout $(cap 300 60) python3 $AB $Q "$o/qwen3" --rounds 2 --replays 2 \
  --variants main dense-1x2 dense-2x2 dense-4x2 dense-4x4 dense-8x4 >"$o/qwen3.txt" 2>&1
since "ab (exit $?)"; tail -7 "$o/qwen3.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
