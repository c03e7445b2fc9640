#!/usr/bin/env bash
# Session 16, call 1 (one H200; carry .llama-pack, .whl, .gpu-bundle/wheels): issue 34 on branch
# s16-gpu (main + h34k's two MoE decode fusions + h38g's dequantizing MMA, off by default).
# The MoE kernels' GPU tests and the engine's MoE tests; launches per layer on cuda; Qwen3-30B-A3B
# Q4_K_M random: tg128, pp512 and 32k kivi4/rot4 beside llama-bench with the eager step's kernel
# profile; the same engine with both fusions undone (benchmarks/moe_fusions_off.py); gpt-oss-20b
# MXFP4 tg128/pp512 beside llama-bench with its profile; then experts in RAM on a simulated 12 GiB
# card beside llama-bench's --n-cpu-moe settings (benchmarks/moe_offload_show.sh).
set -uo pipefail
R=$OUT; o=/tmp/o1; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
left() { echo $(( ${DEADLINE_S:-560} - ($(date +%s) - start) )); }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
OUT=$o source benchmarks/gpu/show_env.sh
export PYTHONPATH="$PYTHONPATH:/tmp/site"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >"$o/gpu.txt" 2>&1
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
( random_model $Q qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf
  random_model $G gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf ) >/tmp/logs/write.txt 2>&1 &
writer=$!
T="HEARTH_GPU_TESTS=1 timeout 60 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE"
env $T tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_compiles.py \
  tests/kernels/test_moe_gemv.py -k "gpu or compiles or rounds_h or router_gemv or selected_and_grouped" \
  >"$o/tests-kernels.txt" 2>&1
echo "kernel tests: exit $?" >>"$o/steps.txt"; tail -3 "$o/tests-kernels.txt" >>"$o/steps.txt"
env $T tests/engine/hearth/test_gpu.py -k "qwen3moe or gpt or ram or pinned" \
  >"$o/tests-engine.txt" 2>&1
echo "engine tests: exit $?" >>"$o/steps.txt"; tail -3 "$o/tests-engine.txt" >>"$o/steps.txt"
since tests
timeout 60 python3 -m benchmarks.moe_launches --device cuda --model qwen3moe,gpt-oss,llama \
  >"$o/launches.txt" 2>&1
since launches
wait $writer; tail -2 /tmp/logs/write.txt >>"$o/steps.txt"; since "files"
timeout 120 python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --profile --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 speed (exit $?)"
timeout 60 python3 -m benchmarks.moe_fusions_off $Q --kv paged-f16 --depth 0 --tokens 128 \
  --json "$o/fusions_off.json" >"$o/fusions_off.txt" 2>&1
since "fusions off (exit $?)"
timeout 80 python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --profile --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss speed (exit $?)"
mkdir -p "$o/offload"
OUT="$o/offload" timeout $(( $(left) - 8 )) bash benchmarks/moe_offload_show.sh \
  >"$o/offload/stdout.txt" 2>&1
since "offload (exit $?)"
tar czf "$R/all.tgz" -C /tmp o1
