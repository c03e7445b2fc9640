#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callG*
# (5 files); kept as it ran, so it may name code removed since.
# session 10 call G: kivi4 K's tile built 2-D (AttentionTuning.flat_kivi_k): its GPU tests, then
# kivi4/rot4 at 4k/32k/128k with the flag on between two timings of the default, and the verdict
set -uo pipefail
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
SECONDS=0
export PYTHONPATH="$PWD"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 100 python3 -m pytest tests/kernels/test_kv_page_step.py -m gpu -v -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$OUT/tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -8
timeout 120 python3 -m benchmarks.kernels --no-gemv --no-write --pairs f16/f16,kivi4/rot4 \
  --contexts 4096,32768,131072 --flag flat_kivi_k --json "$OUT/attention.json" > "$OUT/attention.txt" 2>&1
echo "== attention ($SECONDS s)"; cat "$OUT/attention.txt"
python3 -m benchmarks.kernels.attention_flags "$OUT/attention.json" --flag flat_kivi_k 2>&1 | tee "$OUT/verdict.txt"
