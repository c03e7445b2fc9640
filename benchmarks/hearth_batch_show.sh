#!/usr/bin/env bash
# Continuous batching on the Hearth engine beside llama.cpp on one NVIDIA GPU (issue 38, docs/
# server.md): benchmarks/server_concurrency.py at 1, 4, 16 and 64 streaming clients (512-token replies, ignore_eos, distinct prompts) against `hearth serve --engine
# hearth`, `hearth serve` on llama.cpp (today's default) and the same build's llama-server, on a
# Llama-3-8B-shaped Q4_K_M with random blocks and llama.cpp's Llama 3 vocabulary
# (benchmarks/hearth_speed.py --write-random). Decode tok/s and TTFT p50/p95 come apart. The
# batch's correctness on the GPU is tests/engine/hearth/test_gpu_batch.py (HEARTH_GPU_TESTS=1).
#
#   bash benchmarks/hearth_batch_show.sh [server_concurrency options]    results in $OUT (./out)
#
# Needs .gpu-bundle/ (benchmarks/gpu/make_bundle.sh) in the repository root, and the server's
# Python packages (FastAPI, uvicorn, pydantic) as wheels in .whl/ unless the machine has them;
# llama.cpp is built first unless /tmp/llama/env.sh exists (about 3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/gpu/show_env.sh
if ! python3 -c "import fastapi, uvicorn" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/server-site .whl/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/server-site"
fi
model=/tmp/models/llama3-8b-random-q4_k_m.gguf
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
random_model "$model" llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf
python3 benchmarks/server_concurrency.py "$model" --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth llama --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 \
  --ctx 1024 --rounds 1 --level-timeout 100 --logs "$out" "$@" \
  --json "$out/server-concurrency.json" 2>&1 | tee "$out/server-concurrency.txt"
