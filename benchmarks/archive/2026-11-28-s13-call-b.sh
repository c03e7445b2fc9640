#!/usr/bin/env bash
# Session 13, call B (one H200): llama.cpp built from the bundle while the Hearth engine's batch
# runs on the GPU (tests/engine/hearth/test_gpu_batch.py); the build packed in three parts for
# a later call on a fresh machine; continuous batching on the Hearth engine against the same
# build's llama-server (benchmarks/hearth_batch_show.sh: 1, 4, 16, 64 clients, 512-token
# replies); the shared 2,000-token system prompt at 16 clients if time is left.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out" /tmp/logs
export PYTHONUNBUFFERED=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
( HEARTH_GPU_TESTS=1 PYTHONPATH=$PWD timeout 240 python3 -m pytest -q -p no:cacheprovider \
    tests/engine/hearth/test_gpu_batch.py >"$out/gpu-batch-test.txt" 2>&1 ) &
tests=$!
model=/tmp/models/llama3-8b-random-q4_k_m.gguf; mkdir -p /tmp/models
vocab=/tmp/llama/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf
( while [ ! -s "$vocab" ]; do sleep 2; done; sleep 5
  PYTHONPATH=$PWD python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model.part" \
    --vocab "$vocab" >/tmp/logs/write-8b.txt 2>&1 && mv "$model.part" "$model" ) &
writer=$!
LLAMA_EXTRA_TARGETS=llama-server bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama \
  >/tmp/logs/build.txt 2>&1 || tail -20 /tmp/logs/build.txt >>"$out/steps.txt"
since built
wait $tests; since "batch tests"
src=$(ls -d /tmp/llama/llama_cpp_python-*)
tar -cf - -C / tmp/llama/env.sh tmp/llama/site tmp/llama/cxx-runtime "${src#/}/build/bin" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" 2>>"$out/steps.txt" \
  | xz -T16 -6 | split -b 15900000 - "$out/llama-build.tar.xz."
ls -l "$out" >>"$out/steps.txt"; since packed
wait $writer; since "8B written"
left=$(( 590 - ($(date +%s) - start) ))
OUT="$out" timeout "$left" bash benchmarks/hearth_batch_show.sh --hearth-engines hearth \
  --logs /tmp/logs
since "batch show"
left=$(( 590 - ($(date +%s) - start) ))
if [ "$left" -gt 80 ]; then
  source /tmp/llama/env.sh; export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/server-site"
  timeout "$left" python3 benchmarks/server_concurrency.py "$model" --llama-server \
    "$(command -v llama-server)" --hearth-engines hearth --clients 16 --max-tokens 128 \
    --shared-prefix-words 2000 --ctx 4096 --rounds 1 --level-timeout 60 --logs /tmp/logs \
    2>&1 | tee -a "$out/server-concurrency.txt"
  since "shared prefix"
fi
head -c 60000 /tmp/logs/hearth-engine.log >"$out/hearth-engine.log"
