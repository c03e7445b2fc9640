#!/usr/bin/env bash
# Session 27's fifth device call (one H200; carry .llama-pack and .whl): a token's experts
# split in the engine (engine/hearth/staged_experts.py: c picks by ggml, the others copied
# into device slots by the copy engine, the decode graph cut into pieces at each layer in
# RAM): its GPU tests and the unpack kernel's, then experts in RAM on a simulated 12 GiB card
# (benchmarks.moe_offload show: read in place, splits of 2, 3 and 4 picks by the CPU,
# llama-bench's --n-cpu-moe settings beside them).
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q &
writer=$!
HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/hearth/test_gpu.py tests/kernels/test_expert_unpack.py \
  -k "split_runs or host_nodes or experts_in_ram or pinned_copy or unpack or lands or refused" \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 360 10) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
  --skip-cpu --split-picks 3,2,4 --out "$o/offload" >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "tok/s\|x (the" "$o/offload.txt" | cut -c1-200 >>"$o/steps.txt"
