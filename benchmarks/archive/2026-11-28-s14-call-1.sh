#!/usr/bin/env bash
# Session 14, call 1 (one H200): issue 38. The build unpacked from .llama-pack; the packed GEMM's
# GPU tests and test_gpu_batch.py, then its benchmark rows (benchmarks/kernels/gpu_quant_gemm.sh,
# no sweep) while the 8B-shaped random Q4_K_M is written; then continuous batching on the Hearth
# engine and `hearth serve` on llama.cpp against the same build's llama-server (1, 4, 16, 64
# clients, 512-token replies); the shared 2,000-token prompt at 16 clients; the speed-of-light
# gauge (`hearth bench --engine hearth`) with what time is left.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out/gemm" /tmp/logs/prefix /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${DEADLINE_S:-575} - ($(date +%s) - start) )); }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/server-site .whl/*.whl >"$out/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$out/steps.txt"
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/server-site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >>"$out/gpu.txt" 2>&1
since unpacked
model=/tmp/models/llama3-8b-random-q4_k_m.gguf
vocab=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf
( python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model.part" --vocab "$vocab" \
    >/tmp/logs/write-8b.txt 2>&1 && mv "$model.part" "$model" && sync ) &
writer=$!
OUT="$out/gemm" SWEEP_S=0 TEST_S=100 BENCH_S=80 bash benchmarks/kernels/gpu_quant_gemm.sh \
  >"$out/gemm/stdout.txt" 2>&1
since "packed GEMM tests and rows"
wait $writer; since "8B written"; tail -3 /tmp/logs/write-8b.txt >>"$out/steps.txt"
python3 benchmarks/server_concurrency.py "$model" --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth llama --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 \
  --ctx 1024 --rounds 1 --level-timeout 70 --logs /tmp/logs \
  --json "$out/server-concurrency.json" 2>&1 | tee "$out/server-concurrency.txt"
since "batch show"
for f in hearth-engine hearth-llama.cpp; do
  [ -f /tmp/logs/$f.log ] && { head -c 20000 /tmp/logs/$f.log; echo ...; tail -c 20000 /tmp/logs/$f.log; } >"$out/$f.log"
done
if [ "$(left)" -gt 100 ]; then
  timeout $(( $(left) - 5 )) python3 benchmarks/server_concurrency.py "$model" --llama-server \
    "$(command -v llama-server)" --hearth-engines hearth --clients 16 --max-tokens 128 \
    --shared-prefix-words 2000 --ctx 4096 --rounds 1 --level-timeout 45 --logs /tmp/logs/prefix \
    2>&1 | tee "$out/shared-prefix.txt"
  since "shared prefix"
fi
if [ "$(left)" -gt 45 ]; then
  timeout $(( $(left) - 3 )) python3 -c "import sys; from engine.cli import main; sys.exit(main())" \
    bench "$model" --engine hearth --reps 1 2>&1 | tail -40 >"$out/gauge.txt"
  since gauge
fi
