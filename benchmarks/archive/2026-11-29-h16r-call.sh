#!/usr/bin/env bash
# h16r (issue 34): MoE decode's non-expert kernels. Run from the repository root, on one H200,
# in the session's call environment (torch 2.11 + Triton 3.6 on PYTHONPATH); $1: the output
# folder. About 2 minutes. The whole-model hearth_speed runs (Qwen3-30B-A3B, gpt-oss-20b) are
# the lead's, with this branch merged.
#   tests-kernels.txt  route_from_router / select_and_route by rank and by argmax, compiled, at
#                      the real routers (1 and 16 tokens, CUDA-graph replays), the two agreeing;
#                      RMSNorm with the attention output bias
#   tests-engine.txt   the engine's GPU tests of gpt-oss (its attention output bias now added in
#                      the FFN norm's launch, the activations kept in f16) and the bias dtype
#   router.txt         route_from_router per call, argmax vs rank selection, 1/2/4 tokens, at
#                      Qwen3's 128 x 2048 top-8 and gpt-oss's 32 x 2880 top-4 routers (the old
#                      launch: 7.1 us at Qwen3 in the step's profile; rank is meant to be ~3)
#   launches.txt       launches per layer on cuda (gpt-oss: no torch `add` left)
#   gemv_q8_0.txt      block32's Q8_0 GEMV at gpt-oss's three Q8_0 shapes over 10 tiles: which
#                      tile float_config should give Q8_0 at one row (785 us of gpt-oss's step)
set -uo pipefail
o=${1:?usage: $0 OUTPUT_FOLDER}
mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
T="HEARTH_GPU_TESTS=1 timeout 90 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE"
env $T tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_gemv.py \
  tests/kernels/test_norms_and_activations.py \
  -k "route_from_router or router_gemv or selected_and_grouped or rank_and_argmax or rms_norm" \
  >"$o/tests-kernels.txt" 2>&1
since "kernel tests (exit $?)"; tail -3 "$o/tests-kernels.txt" >>"$o/steps.txt"
env $T tests/engine/hearth/test_gpu.py tests/engine/hearth/test_forward.py -k "gpt or bias" \
  >"$o/tests-engine.txt" 2>&1
since "engine tests (exit $?)"; tail -3 "$o/tests-engine.txt" >>"$o/steps.txt"
timeout 60 python3 -m benchmarks.kernels.router >"$o/router.txt" 2>&1
since "router (exit $?)"
timeout 60 python3 -m benchmarks.moe_launches --device cuda --model qwen3moe,gpt-oss \
  >"$o/launches.txt" 2>&1
since "launches (exit $?)"
timeout 90 python3 -m benchmarks.kernels.gemv_q8_0 >"$o/gemv_q8_0.txt" 2>&1
since "gemv_q8_0 (exit $?)"
