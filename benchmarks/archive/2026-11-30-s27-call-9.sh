#!/usr/bin/env bash
# Session 27's ninth device call (one H200; carry .llama-pack and .whl): main as submitted.
# The engine's GPU tests (tests/engine/hearth/test_gpu.py: the decode graph now replays as
# graph pieces, one piece without a split) and the unpack kernel's; Qwen3-30B-A3B all on the
# GPU (tg128 and the graph's replays, against session 25's 517.8 tok/s and 1.922 ms); experts
# in RAM on a simulated 12 GiB card (benchmarks.moe_offload show: read in place, the split of
# 3 picks by the CPU the planner now chooses, llama-bench's --n-cpu-moe settings).
source benchmarks/gpu/call_prelude.sh o9
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q &
writer=$!
HEARTH_GPU_TESTS=1 timeout 170 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/hearth/test_gpu.py tests/kernels/test_expert_unpack.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -4 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 80 150) python3 -m benchmarks.hearth_speed $Q --kv paged-f16 --depth 0 --tokens 128 \
  --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 all on the GPU (exit $?)"; grep -h "tg128\|replays" "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 200 5) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
  --skip-cpu --split-picks 3 --out "$o/offload" >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "tok/s\|x (the" "$o/offload.txt" | cut -c1-200 >>"$o/steps.txt"
