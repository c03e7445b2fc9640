#!/usr/bin/env bash
# Session 16, branch h16h (issue 34 item 3, experts in RAM), one H200, about 3.5 minutes once
# llama.cpp's CUDA build and the Qwen3 file are there:
#
#   bash benchmarks/archive/2026-11-29-h16h-call.sh OUTDIR
#
# 1. The GPU tests of the new path (tests/engine/hearth/test_gpu.py): a layer's experts computed
#    by ggml on the CPU inside the decode step (a host function queued with cuLaunchHostFunc,
#    captured as a host node of the CUDA graph), all picks or split with the GPU's in-place
#    read on a side stream, against the experts all on the GPU; and the earlier in-RAM tests.
# 2. benchmarks/moe_offload.py on a simulated 12 GiB card: the planner's in-place placement (as
#    in call 1; the cache, 11.5 tok/s there, left out), then at the same count of layers the
#    experts computed by the CPU, split 4 and 5 of 8 picks a token on the CPU, split 4 at two
#    layers fewer (fails if it does not fit); beside llama-bench tg128 at --n-cpu-moe 16, 18,
#    20, 22 and 48 (the llama.cpp planner's 20 and around it).
# Needs /tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf (written earlier in the call) and
# llama.cpp's build (benchmarks/gpu/show_env.sh builds it from .gpu-bundle/ if /tmp/llama/env.sh
# is missing: 3 minutes more). ggml's CPU library comes from that build (LLAMA_CPP_LIB_PATH).
set -uo pipefail
o=${1:?output folder}
mkdir -p "$o/offload"
cd "$(dirname "$0")/../.." || exit 1
OUT=$o source benchmarks/gpu/show_env.sh
export HEARTH_GPU_TESTS=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current \
    --format=csv,noheader
  nproc
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
  echo "LLAMA_CPP_LIB_PATH=${LLAMA_CPP_LIB_PATH:-}"
  ls "${LLAMA_CPP_LIB_PATH:-/nonexistent}" | grep ggml
} >"$o/gpu.txt" 2>&1
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/engine/hearth/test_gpu.py \
  -k "host_nodes or experts_in_ram or pinned" >"$o/gpu-tests.txt" 2>&1
since "gpu tests (exit $?)"
tail -3 "$o/gpu-tests.txt" >>"$o/steps.txt"
model=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
if [ -f "$model" ]; then
  timeout 330 python3 -m benchmarks.moe_offload --model "$model" --card 12 --out "$o/offload" \
    --cpu-picks-list 4,5 --fewer 2 --skip-cache --hearth-timeout 90 \
    >"$o/offload/moe_offload.txt" 2>&1
  since "moe_offload (exit $?)"
else
  since "no $model: moe_offload not run"
fi
