#!/usr/bin/env bash
# Session 13, call A (one H200): llama.cpp built from the bundle while the random-block 8B
# Q4_K_M is written beside it; the Hearth engine's batch on the GPU
# (tests/engine/hearth/test_gpu_batch.py, first failure in full); then continuous batching on
# the Hearth engine against llama-server and `hearth serve` on llama.cpp
# (benchmarks/hearth_batch_show.sh: 1, 4, 16, 64 clients, 512-token replies).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
model=/tmp/models/llama3-8b-random-q4_k_m.gguf; mkdir -p /tmp/models
vocab=/tmp/llama/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf
( while [ ! -s "$vocab" ]; do sleep 2; done; sleep 5
  PYTHONPATH=$PWD python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model.part" \
    --vocab "$vocab" >"$out/write-8b.txt" 2>&1 && mv "$model.part" "$model" ) &
writer=$!
{ time bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama; } >"$out/build.txt" 2>&1
since built
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH"
HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/hearth/test_gpu_batch.py >"$out/gpu-batch-test.txt" 2>&1
since "batch tests"
wait $writer; since "8B written"
left=$(( 585 - ($(date +%s) - start) ))
OUT="$out" timeout "$left" bash benchmarks/hearth_batch_show.sh --hearth-engines hearth llama
since "batch show"
