#!/usr/bin/env bash
# Session 14, call 4 (one H200): every GPU test of tests/kernels and the engine's (pytest-xdist,
# 12 workers) while the 8B-shaped random Q4_K_M is written; the GEMV against the dequantized GEMM
# at 1-32 rows (benchmarks/kernels/quant_gemm.py); the batch decoder in process with a per-step
# profile (benchmarks/hearth_batch_decode.py --profile: forward vs host, graph or eager) at 1-64
# sequences; then `hearth serve --engine hearth` against llama-server (1, 4, 16, 64 clients,
# 512-token replies) with the time left.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${DEADLINE_S:-560} - ($(date +%s) - start) )); }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/server-site .whl/*.whl >"$out/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$out/steps.txt"
source benchmarks/gpu/show_env.sh; out=${OUT:-out}
export PYTHONPATH="$PYTHONPATH:/tmp/server-site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt"
since unpacked
model=/tmp/models/llama3-8b-random-q4_k_m.gguf
( random_model "$model" llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf >/tmp/logs/write-8b.txt 2>&1 ) &
writer=$!
HEARTH_GPU_TESTS=1 timeout ${TEST_S:-200} python3 -m pytest -n 12 -q -p no:cacheprovider -rfE \
  tests/kernels tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  >"$out/gpu-tests.txt" 2>&1
echo "gpu tests: exit $?" >>"$out/steps.txt"; tail -3 "$out/gpu-tests.txt" >>"$out/steps.txt"
since "gpu tests"
timeout 60 python3 -m benchmarks.kernels.quant_gemm --rows 1,2,4,8,12,16,24,32 \
  --json "$out/gemm-rows.json" >"$out/gemm-rows.txt" 2>&1
since "gemm rows"
wait $writer; since "8B written"
timeout 150 python3 -m benchmarks.hearth_batch_decode "$model" --clients 1 2 4 8 16 32 64 \
  --max-tokens 128 --profile >"$out/batch-profile.txt" 2>&1
since "batch profile"
if [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 5 )) python3 benchmarks/server_concurrency.py "$model" \
    --llama-server "$(command -v llama-server)" --hearth-engines hearth --clients 1 4 16 64 \
    --max-tokens 512 --prompt-words 64 --ctx 1024 --rounds 1 --level-timeout 60 \
    --logs /tmp/logs --json "$out/server-concurrency.json" >"$out/server-concurrency.txt" 2>&1
  since "serving"
  cp /tmp/logs/hearth-engine.log "$out/" 2>/dev/null
fi
