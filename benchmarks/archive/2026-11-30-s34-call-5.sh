#!/usr/bin/env bash
# Session 34's fifth device call (one H200; carry .llama-pack and .whl): the final tree's GPU
# tests (the Hearth engine's test_gpu.py and test_gpu_batch.py whole, the new and changed
# kernels' tests), then Qwen3-30B-A3B on a simulated 12 GiB card with the split's share tuned
# (split 3 planned; the tuning's own time printed) beside llama-bench --n-cpu-moe 18, 20.
export DEADLINE_S=400
source benchmarks/gpu/call_prelude.sh c5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q &
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 240 10) python3 -m pytest -q -p no:cacheprovider -n 8 tests/kernels/test_step_to_host.py \
  tests/kernels/test_host_published.py tests/kernels/test_expert_unpack.py \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py >$o/tests.txt 2>&1
since "tests (exit $?)"; tail -4 $o/tests.txt >>$o/steps.txt
wait
since written
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
timeout $(cap 110 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 \
  --out "$o/tuned" >"$o/tuned.txt" 2>&1
since "tuned (exit $?)"; grep -h "Hearth engine\|llama-bench tg" "$o/tuned.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
since end
