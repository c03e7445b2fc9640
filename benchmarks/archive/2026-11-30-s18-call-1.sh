#!/usr/bin/env bash
# Prepared at the end of session 17 for the next session's first call (one H200; carry
# .llama-pack, .whl, .gpu-bundle/wheels). Main as session 17 left it, measured as a whole:
#   1. every GPU test of the engine and the kernels session 17 touched, with -v so that each
#      test's name is written as it finishes (call 3's run was cut before pytest named its 9
#      failures);
#   2. Qwen3-30B-A3B and gpt-oss-20b beside llama-bench (issue 34), and the 8B (issue 35's dense
#      decode fraction; load cold and warm beside llama.cpp);
#   3. serving at 1 4 8 16 64 clients (issue 38: the 8-client stall of call 3; 16 clients at 1.999x);
#   4. experts in RAM: the planner's choice with its calibrated costs beside llama-bench's
#      --n-cpu-moe list (issue 34), and the memory cards with the prefill graphs' pool (issue 35).
set -uo pipefail
R=$OUT; o=/tmp/o1; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-560}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
OUT=$o source benchmarks/gpu/show_env.sh  # keeps llama.cpp's package on PYTHONPATH
export PYTHONPATH="$PYTHONPATH:/tmp/site"
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( random_model $Q qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf
  random_model $G gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf
  random_model $L llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf ) >/tmp/logs/write.txt 2>&1 &
writer=$!
# 1. GPU tests, each name written as it finishes
HEARTH_GPU_TESTS=1 timeout 200 python3 -m pytest -n 16 -v -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  tests/engine/hearth/test_prefill_graph.py tests/engine/hearth/test_paged_cache.py \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_check_graph.py \
  tests/kernels/test_kv_write_rope.py tests/kernels/test_kv_cache.py tests/kernels/test_kv_kivi.py \
  tests/kernels/test_moe_grouped_gemm_gpu.py tests/kernels/test_gemv_dp4a_rows.py \
  tests/kernels/test_gemv_rows_alike.py tests/kernels/test_moe_gemv_gpu.py \
  tests/kernels/test_moe_compiles.py tests/kernels/test_attention_compiles.py \
  >"$o/tests.txt" 2>&1
echo "tests: exit $?" >>"$o/steps.txt"; grep -E "FAILED|ERROR|passed|failed" "$o/tests.txt" | tail -25 >>"$o/steps.txt"
since tests
wait $writer; tail -3 /tmp/logs/write.txt >>"$o/steps.txt"; since files
# 2. speed beside llama-bench
timeout $(cap 80) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --profile --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 50) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --profile --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss (exit $?)"; grep -h "pp512\|tg128" "$o/gpt-oss.txt" >>"$o/steps.txt"
timeout $(cap 70) python3 -m benchmarks.hearth_speed $L --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --load-runs 2 --json "$o/llama8b.json" >"$o/llama8b.txt" 2>&1
since "llama 8b (exit $?)"; grep -h "load\|pp512\|tg128\|depth" "$o/llama8b.txt" >>"$o/steps.txt"
# 3. serving
timeout $(cap 190) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 1 4 8 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 45 --logs /tmp/logs --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; tail -6 "$o/server.txt" >>"$o/steps.txt"
# 4. experts in RAM and memory (while time is left)
mkdir -p "$o/offload" "$o/memory"
[ "$(left)" -gt 60 ] && { timeout $(cap 120) python3 -m benchmarks.moe_offload show --model $Q --card 12 \
  --out "$o/offload" --skip-cache --hearth-timeout 60 >"$o/offload/show.txt" 2>&1; since "offload (exit $?)"; }
[ "$(left)" -gt 40 ] && { timeout $(cap 90) python3 -m benchmarks.hearth_memory cards --cards 12 24 \
  --shapes qwen3-30b-a3b llama3-8b --kv f16/f16 kivi4/rot4 --budget-s $(( $(left) - 20 )) \
  --out "$o/memory" >"$o/memory/log.txt" 2>&1; since "memory (exit $?)"; }
tar czf "$R/all.tgz" -C /tmp o1
