#!/usr/bin/env bash
# Archived (moved out of docs/measurements/): produced docs/measurements/2026-11-28-s10-callB*
# (5 files); kept as it ran, so it may name code removed since.
# session 10 call B: attention variants (sweep), their GPU tests, the anatomy with the reduce at
# 4 warps; the prefill (pp512) on main and on session 7's tree (0ae3cc2, carried as .dev/base)
set -uo pipefail
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
SECONDS=0
pip install --no-index --no-deps --target /tmp/site .gpu-bundle/wheels/gguf*.whl >/dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
model=/tmp/m.gguf
(python3 -m benchmarks.hearth_speed --write-random llama3-8b "$model" \
  --vocab .vocab/ggml-vocab-llama-bpe.gguf && sync) > "$OUT/write.log" 2>&1 &
writer=$!
timeout 250 python3 docs/measurements/2026-11-28-s10-callB-sweep.py 2>&1 | tee "$OUT/sweep.txt"
echo "== sweep ($SECONDS s)"
timeout 100 python3 -m pytest tests/kernels/test_kv_page_step.py tests/kernels/test_kv_cache_positions.py \
  -k "llama3_8b or chained" -v -p no:cacheprovider > "$OUT/tests.log" 2>&1
echo "== tests ($SECONDS s): $(grep -c PASSED "$OUT/tests.log") passed"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -8
wait $writer; tail -1 "$OUT/write.log"
for tree in main base main base; do
  dir=$PWD; [ $tree = base ] && dir=$PWD/.dev/base
  (cd "$dir" && PYTHONPATH="$dir:/tmp/site" timeout 60 python3 -m benchmarks.prefill_profile "$model" --runs 8) > "$OUT/prefill-$tree.txt" 2>&1
  echo "== prefill $tree ($SECONDS s)"; grep -E "median|host time" "$OUT/prefill-$tree.txt"
done
grep -A12 "kernels by device time" "$OUT/prefill-main.txt"
