#!/usr/bin/env bash
# Session 14, call 3 (one H200): issues 31 and 35. The build unpacked from .llama-pack (if the
# machine is fresh); every GPU test of tests/kernels and the engine's GPU tests (pytest-xdist, 12
# workers: Triton's compiles are the cost) while the 8B-shaped random Q4_K_M is written; then
# benchmarks/hearth_show.sh (load, pp512, tg128, decode at 32k per KV format beside llama-bench);
# then the memory table on simulated 12 and 24 GiB cards (benchmarks/hearth_memory.py cards) with
# the time left.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out/show" "$out/memory" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${DEADLINE_S:-585} - ($(date +%s) - start) )); }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/server-site .whl/*.whl >"$out/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$out/steps.txt"
source benchmarks/gpu/show_env.sh; out=${OUT:-out}
export PYTHONPATH="$PYTHONPATH:/tmp/server-site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt"
since unpacked
( random_model /tmp/models/llama3-8b-random-q4_k_m.gguf llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf \
  >/tmp/logs/write-8b.txt 2>&1 ) &
writer=$!
HEARTH_GPU_TESTS=1 timeout ${TEST_S:-200} python3 -m pytest -n 12 -q -p no:cacheprovider -rfE \
  tests/kernels tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  >"$out/gpu-tests.txt" 2>&1
echo "gpu tests: exit $?" >>"$out/steps.txt"; tail -3 "$out/gpu-tests.txt" >>"$out/steps.txt"
since "gpu tests"
wait $writer; since "8B written"
OUT="$out/show" timeout $(( $(left) - 120 )) bash benchmarks/hearth_show.sh
since "hearth show"
if [ "$(left)" -gt 90 ]; then
  timeout $(( $(left) - 3 )) python3 -m benchmarks.hearth_memory cards --cards 12 24 \
    --shapes llama3-8b mistral-7b gemma3-12b --kv f16/f16 q8/rot4 rot2/rot4 \
    --budget-s $(( $(left) - 60 )) --out "$out/memory" >"$out/memory/hearth-memory.log" 2>&1
  since "memory cards"
fi
