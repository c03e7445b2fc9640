#!/usr/bin/env bash
# Prepared in session 26 and NOT RUN (no device time was left): in-place reads of
# write-combined pinned memory beside ggml (benchmarks/archive/2026-11-30-s26-probe6.py), its
# results written straight to $OUT (one H200; carry .llama-pack and .whl; about 30 s).
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/gguf-*.whl >/dev/null 2>&1
mkdir -p /tmp/bundle/wheels && cp .whl/gguf-*.whl .whl/diskcache-*.whl /tmp/bundle/wheels/
bash benchmarks/gpu/build_llama_cuda.sh /tmp/bundle /tmp/llama >/tmp/build.txt 2>&1
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:${PYTHONPATH:-}:/tmp/site"
python3 benchmarks/archive/2026-11-30-s26-probe6.py "$OUT/probe6.json" 2>&1 | grep -v repack
