#!/usr/bin/env bash
# Session 16, call 4 (one H200; carry .llama-pack, .whl, .gpu-bundle/wheels): the session's
# helpers' branches merged (s16-final) measured in one call, each step under a time limit taken
# from what is left of the call, the highest priority first:
#   1. every GPU test the branches touched, in one pytest -n 16;
#   2. Qwen3-30B-A3B Q4_K_M and gpt-oss-20b MXFP4 beside llama-bench, with the eager step's
#      kernel profile (issue 34: the expert GEMV by byte permutes and 16-row downs, the router);
#   3. the dequantizing MMA's rows at 2-64 (its new loop), then serving beside llama-server at 4,
#      16, 64 clients with the rows table those figures give (issue 38);
#   4. experts in RAM on a simulated 12 GiB card: in place, on the CPU in the graph's host
#      nodes, split 4/4 (issue 34);
#   5. the memory cards that missed in call 3, with expandable segments (issue 35);
#   6. the MoE expert GEMV's rows and launch shapes, the router old against new.
set -uo pipefail
R=$OUT; o=/tmp/o4; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-565}
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
HEARTH_DEQUANT_MMA_ROWS=Q4_K:2-64,Q6_K:2-64 HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -n 16 -q -p no:cacheprovider -rfE \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_compiles.py \
  tests/kernels/test_prefill_masks.py tests/kernels/test_kv_kivi.py \
  tests/kernels/test_dequant_mma.py tests/kernels/test_nibbles.py \
  tests/kernels/test_dequant_mma_compiles.py tests/engine/hearth/test_gpu_batch.py \
  tests/engine/hearth/test_gpu.py tests/kernels/test_moe_gemv.py \
  tests/kernels/test_norms_and_activations.py \
  >"$o/tests.txt" 2>&1
echo "tests: exit $?" >>"$o/steps.txt"; grep -E "^FAILED|^ERROR|passed|failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
since tests
wait $writer; tail -3 /tmp/logs/write.txt >>"$o/steps.txt"; since files
# 2. MoE decode beside llama-bench
timeout $(cap 75) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --profile --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 speed (exit $?)"
timeout $(cap 45) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --profile --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss speed (exit $?)"
# 3. the dequantizing MMA's rows (2-64), then serving with the table they give
mkdir -p "$o/mma"
timeout $(cap 55) python3 -m benchmarks.kernels.dequant_mma --rows 2,4,8,9,16,32,64 \
  --json "$o/mma/rows.json" >"$o/mma/rows.txt" 2>&1
since "mma rows (exit $?)"
table=$(python3 - "$o/mma/rows.txt" <<'PY'
import ast, re, sys
text = open(sys.argv[1]).read()
m = re.findall(r"ROWS_WON from these figures: (\{.*\})", text)
table = ast.literal_eval(m[-1]) if m else {"Q4_K": (16, 64), "Q6_K": (9, 64)}
print(",".join(f"{k}:{a}-{b}" for k, (a, b) in table.items()))
PY
)
echo "HEARTH_DEQUANT_MMA_ROWS=$table" | tee -a "$o/steps.txt"
HEARTH_DEQUANT_MMA_ROWS="$table" timeout $(cap 100) python3 benchmarks/server_concurrency.py "$L" \
  --llama-server "$(command -v llama-server)" --hearth-engines hearth --clients 4 16 64 \
  --max-tokens 512 --prompt-words 64 --ctx 1024 --rounds 1 --level-timeout 25 \
  --logs /tmp/logs --json "$o/server-concurrency.json" >"$o/server-concurrency.txt" 2>&1
since "serving (exit $?)"
# 4. experts in RAM
mkdir -p "$o/offload"
timeout $(cap 130) python3 -m benchmarks.moe_offload --model $Q --card 12 --out "$o/offload" \
  --cpu-picks-list 4 --skip-cache --hearth-timeout 60 >"$o/offload/moe_offload.txt" 2>&1
since "offload (exit $?)"
# 5. memory: the dense miss of call 3 (12 GiB, llama3-8b rot4/rot4) and the Qwen3 one (16 GiB,
# kivi4/rot4, 39 layers' experts in RAM)
mkdir -p "$o/memory-dense" "$o/memory-qwen3"
if [ "$(left)" -gt 45 ]; then
  timeout $(cap 40) python3 -m benchmarks.hearth_memory cards --cards 12 --shapes llama3-8b \
    --kv rot4/rot4 --budget-s 5 --out "$o/memory-dense" >"$o/memory-dense/log.txt" 2>&1
  since "memory dense (exit $?)"
fi
if [ "$(left)" -gt 60 ]; then
  timeout $(cap 70) python3 -m benchmarks.hearth_memory cards --cards 16 --shapes qwen3-30b-a3b \
    --kv kivi4/rot4 --budget-s 5 --out "$o/memory-qwen3" >"$o/memory-qwen3/log.txt" 2>&1
  since "memory qwen3 (exit $?)"
fi
# 6. kernel rows
timeout $(cap 50) python3 -m benchmarks.kernels.moe --tokens 1,16 \
  --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down,gpt-oss-20b gate+up,gpt-oss-20b down" \
  --sweep --sweep-tokens 1 --kernels-only --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "moe rows (exit $?)"
timeout $(cap 30) python3 -m benchmarks.kernels.router >"$o/router.txt" 2>&1
since "router (exit $?)"
tar czf "$R/all.tgz" -C /tmp o4
