#!/usr/bin/env bash
# Session 35's third device call (one H200; carry .llama-pack and .whl): the tree with ggml's
# experts in three nodes, three rounds of experts in RAM beside llama-bench -ncmoe 18, 20
# (medians compared), then the GPU tests of the experts in RAM and the whole test_gpu.py.
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
timeout $(cap 240 5) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 --rounds 3 \
  --out "$o/tuned" >"$o/tuned.txt" 2>&1
since "tuned (exit $?)"; grep -h "Hearth engine\|llama-bench tg\|best Hearth" "$o/tuned.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
timeout $(cap 200 5) python3 -m pytest -q -p no:cacheprovider -n 8 \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_cpu_experts.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
since end
