#!/usr/bin/env bash
# Session 16, call 3 (the same warm H200; carry .whl): issues 35 and 34 on branch s16-gpu. The
# shared prefill mask's GPU tests; the Hearth engine's memory table (benchmarks/hearth_memory.py
# cards: predicted against NVML's sampled peak, each load decoded at the planned length) for
# three dense shapes x five K/V pairs on simulated 24 and 12 GiB cards; then the longest context
# for the Qwen3-30B-A3B shape on simulated 16 and 24 GiB cards (experts in RAM where the weights
# do not fit), each loaded and decoded. The model files are sparse (written here in seconds).
set -uo pipefail
R=$OUT; o=/tmp/o3; mkdir -p "$o/memory" "$o/qwen3"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$o/gpu.txt"
timeout 40 python3 -m pytest -q -p no:cacheprovider -rfE tests/kernels/test_grouped_attention.py \
  tests/kernels/test_prefill_masks.py -k gpu >"$o/gpu-tests.txt" 2>&1
since "mask gpu tests (exit $?)"
timeout 290 python3 -m benchmarks.hearth_memory cards --cards 24 12 \
  --shapes llama3-8b mistral-7b gemma3-12b --kv f16/f16 q8/q8 q8/rot4 rot4/rot4 rot2/rot4 \
  --budget-s 250 --out "$o/memory" >"$o/memory/hearth-memory.log" 2>&1
since "dense cards (exit $?)"
timeout 220 python3 -m benchmarks.hearth_memory cards --cards 16 24 --shapes qwen3-30b-a3b \
  --kv f16/f16 q8/rot4 kivi4/rot4 --budget-s 150 --out "$o/qwen3" >"$o/qwen3/log.txt" 2>&1
since "qwen3 cards (exit $?)"
tar czf "$R/all.tgz" -C /tmp o3
