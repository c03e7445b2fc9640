#!/usr/bin/env bash
# Session 35's sixth device call (one H200; carry .llama-pack and .whl): gpt-oss-20b on a
# simulated 12 GiB card, where llama.cpp's plan holds every expert on the GPU and the Hearth
# engine's keeps some layers' in RAM (Best fit decides such a pair by the predictions): the
# Hearth engine's planned split beside llama-bench -ncmoe 0 and 2; then the MoE kernels' and
# the norms' GPU tests (full shapes), as far as the time goes.
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c6
install_wheels
llama_from_pack
since unpacked
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
write_random gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf $G
since written
export TRITON_CACHE_DIR=/tmp/tc
OFF="--model $G --skip-cache --skip-cpu --skip-in-place --split-picks 2"
timeout $(cap 150 5) python3 -m benchmarks.moe_offload show $OFF --card 12 --ncmoe 0,2 \
  --out "$o/card12" >"$o/card12.txt" 2>&1
since "card12 (exit $?)"; grep -h "planner\|Hearth engine\|llama-bench tg\|best Hearth" "$o/card12.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
HEARTH_GPU_TESTS=1 timeout $(cap 330 5) python3 -m pytest -q -p no:cacheprovider -n 16 -rfE \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_one_token.py \
  tests/kernels/test_moe_grouped_gemm_gpu.py tests/kernels/test_norms_and_activations.py \
  tests/kernels/test_moe_compiles.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -5 "$o/tests.txt" >>"$o/steps.txt"
since end
