#!/usr/bin/env bash
# Session 14, call 6 (one H200, what the session's device time had left: about 2.5 minutes of
# command): the GPU tests of what changed after call 5 (the batch's matmul paths, the CUDA-graph
# step against the eager one, experts in RAM, the integer GEMV's row limit, the new integer MMA
# GEMM kernels/quant_mma.py with its sm_90 compile check), then the MMA's first benchmark rows
# at 16 and 64 rows beside the dequantized GEMM and the integer GEMV.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out" /tmp/logs
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$out/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/server-site .whl/*.whl >/dev/null 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/server-site"
since unpacked
timeout ${TEST_S:-80} python3 -m pytest -n 8 -q -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu_batch.py tests/kernels/test_gemv_dp4a.py \
  tests/kernels/test_quant_mma.py tests/kernels/test_quant_mma_compiles.py \
  "tests/engine/hearth/test_gpu.py::test_experts_in_ram_give_the_logits_of_experts_on_the_gpu" \
  >"$out/gpu-tests.txt" 2>&1
echo "gpu tests: exit $?" >>"$out/steps.txt"; tail -4 "$out/gpu-tests.txt" >>"$out/steps.txt"
since "gpu tests"
timeout ${BENCH_S:-45} python3 -m benchmarks.kernels.quant_mma --rows 16,64 \
  --json "$out/mma.json" >"$out/mma.txt" 2>&1
since "mma rows"
