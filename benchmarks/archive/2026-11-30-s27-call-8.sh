#!/usr/bin/env bash
# Session 27's eighth device call (the seventh again after its copier thread failed to start: torch.cuda.set_device refused a bare "cuda") (one H200; carry .llama-pack and .whl): the split with its
# copies issued on a thread of their own while ggml runs, its slots' grouping made once, and
# no conversion launches around its pause: the split's GPU test, then experts in RAM on a
# simulated 12 GiB card (benchmarks.moe_offload show: read in place, splits of 3 and 4 picks
# by the CPU, llama-bench's --n-cpu-moe settings).
source benchmarks/gpu/call_prelude.sh o8
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q &
writer=$!
HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/hearth/test_gpu.py -k "split_runs" >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 300 10) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
  --skip-cpu --split-picks 3,4 --out "$o/offload" >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "tok/s\|x (the" "$o/offload.txt" | cut -c1-200 >>"$o/steps.txt"
