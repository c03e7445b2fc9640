#!/usr/bin/env bash
# Produced docs/measurements/2026-11-28-s11-show31/ (call A; run from the repository root with .gpuwork/old = commit 0d902b8).
# Issue 31's GPU show, call A: the kernels' GPU tests on the pruned tree while llama.cpp builds
# and the 8B random-block model is written; then hearth_show on the tree before the pruning.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-bundle/wheels/*.whl 2>&1 | grep -v "as the 'root'" 
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
git_new=$(cat .gpuwork/new_commit 2>/dev/null); echo "new tree: $git_new" | tee -a "$OUT/gpu.txt"
SECONDS=0
(
  set -e
  bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama
  source /tmp/llama/env.sh
  src=$(ls -d /tmp/llama/llama_cpp_python-*)
  mkdir -p /tmp/models
  python3 -m benchmarks.hearth_speed --write-random llama3-8b /tmp/models/llama3-8b-random-q4_k_m.gguf \
    --vocab "$src/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf"
  sync
) > "$OUT/build.log" 2>&1 &
bg=$!
HEARTH_GPU_TESTS=1 timeout 260 python3 -m pytest tests/kernels -q -p no:cacheprovider -rs \
  -k "not llama3_8b_shapes or shape0" > "$OUT/kernel-tests.txt" 2>&1
echo "kernel GPU tests: exit $? at $SECONDS s"; tail -3 "$OUT/kernel-tests.txt"
wait $bg; echo "build + model: exit $? at $SECONDS s"; tail -3 "$OUT/build.log"
mkdir -p "$OUT/old"
(cd .gpuwork/old && OUT="$OUT/old" timeout 300 bash benchmarks/hearth_show.sh) > "$OUT/old-show.log" 2>&1
echo "old hearth_show: exit $? at $SECONDS s"
tail -45 "$OUT/old/hearth-speed.txt"
