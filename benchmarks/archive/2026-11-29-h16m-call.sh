#!/usr/bin/env bash
# Branch h16m (issue 35 item 3): the Hearth memory table's rows that missed max(3%, 128 MiB) in
# session 16's call 3 and their neighbours, after the worker's torch allocator moved to
# expandable segments (engine/hearth/allocator.py; benchmarks/hearth_memory.py sets it for its
# loads as EngineClient does for the worker) and kivi4's chunk rows became one for the cache
# (kernels/kv_cache.py `_scratch`). One H200, about 3 minutes, no llama.cpp. Usage:
#   bash benchmarks/archive/2026-11-29-h16m-call.sh OUTDIR
# What to look at: OUTDIR/*/hearth-memory.md, the column "torch reserved beyond allocated"
# (169-611 MiB in call 3; expandable segments should bring it under about 100) and "within".
set -uo pipefail
o=${1:?output folder}
mkdir -p "$o/dense" "$o/qwen3-kivi4" "$o/qwen3-q8" "$o/control"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF # the benchmark sets the worker's own
start=$(date +%s)
budget=${DEADLINE_S:-200}
left() { echo $((budget - ($(date +%s) - start))); }
since() { echo "$1 after $(($(date +%s) - start)) s" | tee -a "$o/steps.txt"; }
if [ ! -d /tmp/site ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
fi
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$o/gpu.txt"
# kivi4's chunk rows kept once for the cache: its prefill attention on the GPU, as before
timeout 60 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE tests/kernels/test_prefill_masks.py \
  tests/kernels/test_kv_kivi.py >"$o/gpu-tests.txt" 2>&1
since "kivi4 gpu tests (exit $?)"
# the dense miss (12 GiB llama3-8b rot4/rot4, -3.3%) and its neighbours; 6 loads, ~8 s each
timeout 100 python3 -m benchmarks.hearth_memory cards --cards 12 \
  --shapes llama3-8b mistral-7b gemma3-12b --kv rot4/rot4 q8/rot4 --budget-s 70 \
  --out "$o/dense" >"$o/dense/log.txt" 2>&1
since "dense cards (exit $?)"
# control: the dense miss with torch's default segments (a person's own setting is kept), to
# tell what expandable segments changed from what the rest of the branch did
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False timeout 40 python3 -m benchmarks.hearth_memory \
  cards --cards 12 --shapes llama3-8b --kv rot4/rot4 --budget-s 5 \
  --out "$o/control" >"$o/control/log.txt" 2>&1
since "control, default segments (exit $?)"
# Qwen3-30B-A3B kivi4/rot4: 16 GiB (39 layers' experts in RAM, -4.0%) and 24 GiB (-2.9%)
timeout 150 python3 -m benchmarks.hearth_memory cards --cards 16 24 --shapes qwen3-30b-a3b \
  --kv kivi4/rot4 --budget-s 80 --out "$o/qwen3-kivi4" >"$o/qwen3-kivi4/log.txt" 2>&1
since "qwen3 kivi4 cards (exit $?)"
# the same card's q8/rot4 neighbours, while time is left
if [ "$(left)" -gt 40 ]; then
  timeout $(($(left) + 20)) python3 -m benchmarks.hearth_memory cards --cards 24 16 \
    --shapes qwen3-30b-a3b --kv q8/rot4 --budget-s $(($(left) - 40)) \
    --out "$o/qwen3-q8" >"$o/qwen3-q8/log.txt" 2>&1
  since "qwen3 q8/rot4 cards (exit $?)"
fi
