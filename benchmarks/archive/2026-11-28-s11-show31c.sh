#!/usr/bin/env bash
# Produced docs/measurements/2026-11-28-s11-show31/callC/ (the merged tree; .gpuwork/old = commit 0d902b8).
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-bundle/wheels/*.whl 2>&1 | grep -v "as the 'root'"
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
echo "new tree: $(cat .gpuwork/new_commit)" | tee -a "$OUT/gpu.txt"
SECONDS=0
HEARTH_GPU_TESTS=1 timeout 170 python3 -m pytest tests/kernels -q -p no:cacheprovider -rs \
  -k "not llama3_8b_shapes or shape0" > "$OUT/kernel-tests.txt" 2>&1
echo "kernel GPU tests: exit $? at $SECONDS s"; grep -E "passed|failed|FAILED|ERROR" "$OUT/kernel-tests.txt" | tail -8
OUT="$OUT" bash benchmarks/archive/2026-11-28-s11-bisect.sh 2>&1 | tee "$OUT/bisect.txt" | tail -40
echo "bisect done at $SECONDS s"
HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest tests/engine/hearth/test_gpu.py -q -p no:cacheprovider -rs \
  > "$OUT/engine-tests.txt" 2>&1
echo "engine GPU tests: exit $? at $SECONDS s"; grep -E "passed|failed|FAILED|ERROR" "$OUT/engine-tests.txt" | tail -8
