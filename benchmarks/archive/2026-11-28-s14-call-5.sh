#!/usr/bin/env bash
# Session 14, call 5 (one H200): a batch's rows past one by the integer GEMV up to 4 rows
# (kernels.gemv.DP4A_MAX_ROWS) and by the dequantized matrices' GEMM past that. The GEMV rows at
# 1-8 with the integer path allowed up to 8 (to place the threshold); the GPU tests that failed in
# call 4 and the integer GEMV's; the batch decoder's per-step profile at 1-64 sequences; then
# `hearth serve --engine hearth` against llama-server (1, 4, 16, 64 clients, 512-token replies).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${DEADLINE_S:-420} - ($(date +%s) - start) )); }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/server-site .whl/*.whl >"$out/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$out/steps.txt"
source benchmarks/gpu/show_env.sh; out=${OUT:-out}
export PYTHONPATH="$PYTHONPATH:/tmp/server-site"
since unpacked
model=/tmp/models/llama3-8b-random-q4_k_m.gguf
( random_model "$model" llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf >/tmp/logs/write-8b.txt 2>&1 ) &
writer=$!
HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu_batch.py tests/kernels/test_gemv_dp4a.py \
  "tests/engine/hearth/test_gpu.py::test_experts_in_ram_give_the_logits_of_experts_on_the_gpu" \
  >"$out/gpu-tests.txt" 2>&1
echo "gpu tests: exit $?" >>"$out/steps.txt"; tail -3 "$out/gpu-tests.txt" >>"$out/steps.txt"
since "gpu tests"
timeout 50 python3 -c "
import sys, kernels.gemv as g; g.DP4A_MAX_ROWS = 8
from benchmarks.kernels import quant_gemm
sys.exit(quant_gemm.main(['--rows', '1,2,3,4,6,8']))" >"$out/gemv-rows.txt" 2>&1
since "gemv rows"
wait $writer; since "8B written"
timeout 100 python3 -m benchmarks.hearth_batch_decode "$model" --clients 1 2 4 8 16 64 \
  --max-tokens 128 --profile 2>&1 | grep -E "^hearth-batch|^    " >"$out/batch-profile.txt"
since "batch profile"
timeout $(( $(left) - 3 )) python3 benchmarks/server_concurrency.py "$model" \
  --llama-server "$(command -v llama-server)" --hearth-engines hearth --clients 1 4 16 64 \
  --max-tokens 512 --prompt-words 64 --ctx 1024 --rounds 1 --level-timeout 50 \
  --logs /tmp/logs --json "$out/server-concurrency.json" >"$out/server-concurrency.txt" 2>&1
since "serving"
