#!/usr/bin/env bash
# Session 17, call 3 (one H200; carry .llama-pack, .whl, .gpu-bundle/wheels): the session's
# helper branches merged (s17m), every new path on by default, measured in one call under a
# deadline, the highest priority first:
#   1. every GPU test the branches touched, one pytest -n 16 (while the model files are written);
#   2. kernel rows, old against new in one process: the router (h17b), the rows GEMV (h17r), the
#      grouped GEMM at 512 and 64 tokens (h17g);
#   3. Qwen3-30B-A3B and gpt-oss-20b beside llama-bench (tg128, pp512, Qwen3 at 32k kivi4/rot4)
#      with the step's profile: the issue 34 figures of the merged tree;
#   4. the prefill chunk eager against the CUDA graphs (h17p), Qwen3 and gpt-oss;
#   5. Qwen3 tg64 with the MoE fusions of h17b off and the attention fusion of h17a off (old);
#   6. experts in RAM with the OpenMP team released (h17c): every pick on the CPU, 4 of 8.
set -uo pipefail
R=$OUT; o=/tmp/o3; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-540}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
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
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( random_model $Q qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf
  random_model $G gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf
  random_model $L llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf ) >/tmp/logs/write.txt 2>&1 &
writer=$!
# 1. GPU tests
HEARTH_GPU_TESTS=1 timeout 130 python3 -m pytest -n 16 -q -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  tests/engine/hearth/test_prefill_graph.py tests/engine/hearth/test_verify.py \
  tests/engine/hearth/test_check_graph.py tests/engine/hearth/test_paged_cache.py \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_compiles.py \
  tests/kernels/test_moe_grouped_gemm_gpu.py tests/kernels/test_moe_grouped_gemm.py \
  tests/kernels/test_gemv_dp4a_rows.py tests/kernels/test_gemv_rows_alike.py \
  tests/kernels/test_moe_gemv.py tests/kernels/test_rope.py tests/kernels/test_rope_compiles.py \
  tests/kernels/test_kv_write_rope.py tests/kernels/test_kv_cache.py tests/kernels/test_kv_kivi.py \
  tests/kernels/test_kv_batch_rows.py tests/kernels/test_attention_compiles.py \
  >"$o/tests.txt" 2>&1
echo "tests: exit $?" >>"$o/steps.txt"; grep -E "^FAILED|^ERROR|passed|failed" "$o/tests.txt" | tail -15 >>"$o/steps.txt"
since tests
# 2. kernel rows (old against new, one process each)
timeout $(cap 40) python3 -m benchmarks.kernels.router >"$o/router.txt" 2>&1
since "router rows (exit $?)"
timeout $(cap 70) python3 -m benchmarks.kernels.gemv_rows --rows 1,2,4,8,16 --json "$o/rows.json" \
  >"$o/rows.txt" 2>&1
since "gemv rows (exit $?)"
wait $writer; tail -3 /tmp/logs/write.txt >>"$o/steps.txt"; since files
timeout $(cap 50) python3 -m benchmarks.kernels.moe_prefill --tokens 512,64 --json "$o/grouped.json" \
  >"$o/grouped.txt" 2>&1
since "grouped rows (exit $?)"
# 3. issue 34's figures of the merged tree
timeout $(cap 80) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --profile --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 speed (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 50) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --profile --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss speed (exit $?)"; grep -h "pp512\|tg128" "$o/gpt-oss.txt" >>"$o/steps.txt"
# 4. prefill chunks eager against graphs
for m in qwen3:$Q gpt-oss:$G; do
  timeout $(cap 55) python3 -m benchmarks.prefill_profile "${m#*:}" --both --runs 8 \
    >"$o/prefill-${m%%:*}.txt" 2>&1
  since "prefill ${m%%:*} (exit $?)"
  grep -E "^== |median wall|runs eagerly|captured with" "$o/prefill-${m%%:*}.txt" >>"$o/steps.txt"
done
# 5. the decode fusions off (old), Qwen3
HEARTH_ROUTER_LOOPED=1 HEARTH_FUSED_NORM_ROUTER=0 HEARTH_KV_WRITE_ROPE=0 timeout $(cap 50) \
  python3 -m benchmarks.hearth_speed $Q --kv paged-f16 --depth 0 --tokens 64 --profile \
  >"$o/qwen3-fusions-off.txt" 2>&1
since "qwen3 decode fusions off (exit $?)"; grep -h "tg64\|replays alone" "$o/qwen3-fusions-off.txt" >>"$o/steps.txt"
timeout $(cap 30) python3 -m benchmarks.kernels --ops kv_write_rope --pairs f16/f16,q8/rot4,kivi4/rot4 \
  >"$o/kv-write-rope.txt" 2>&1
since "kv_write_rope rows (exit $?)"
# 6. experts in RAM
mkdir -p "$o/offload"
off() { local name=$1; shift
  [ "$(left)" -gt 30 ] || { since "offload $name skipped"; return; }
  timeout $(cap 45) python3 -m benchmarks.moe_offload hearth --model $Q --card 12 --ram-layers 21 \
    --cpu-threads 15 "$@" >"$o/offload/$name.txt" 2>&1
  since "offload $name (exit $?)"; grep '^{' "$o/offload/$name.txt" | tail -1 | cut -c1-600 >>"$o/steps.txt"; }
off cpu8-new --cpu-picks 8
off split4-new --cpu-picks 4
off cpu8-old --cpu-picks 8 --keep-openmp-threads
tar czf "$R/all.tgz" -C /tmp o3
