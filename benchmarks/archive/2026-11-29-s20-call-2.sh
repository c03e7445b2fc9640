#!/usr/bin/env bash
# Session 20's second device call (one H200, a fresh machine; carry .llama-pack, from call 1's
# build, and .whl). Call 1 lost its tests, memory rows and serving to a pip conflict (diskcache's
# wheel in both .whl and .gpu-bundle/wheels; .whl alone holds every wheel now) and left only its
# llama.cpp build, packed. Here, session 19's two candidates behind switches, each timed against
# main in the same call:
#   1. the Q8_0 integer GEMV (kernels/gemv_q8_0.py, HEARTH_Q8_0_DP4A=1): its rows beside the
#      float tiles at gpt-oss-20b's shapes, then gpt-oss's decode with and without (issue 34:
#      1.37x against 1.5x; block32_kernel 740 us of its 2.14 ms step);
#   2. the expert GEMV's next-wave L2 prefetch (kernels/moe_prefetch.py, HEARTH_MOE_PREFETCH=1):
#      Qwen3-30B-A3B's gate+up and down rows at 1 and 16 tokens, then its decode, with and
#      without (issue 34: 1.56x against 2.0x; the expert GEMV 963 us of 2.09 ms);
#   3. the GPU tests of both with the switches on;
#   4. the memory cards' 8B rows on 12 GiB with the prefill graphs' pool made as a session makes it.
set -uo pipefail
R=$OUT; o=/tmp/o2; mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-565}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
trap 'tar czf "$R/all.tgz" -C /tmp o2' EXIT
mkdir -p /tmp/logs /tmp/models
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >"$o/pip.txt" 2>&1
mkdir -p /tmp/bundle/wheels; cp .whl/gguf-*.whl .whl/diskcache-*.whl /tmp/bundle/wheels/
bash benchmarks/gpu/build_llama_cuda.sh /tmp/bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/site"
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
python3 -c "import fastapi, uvicorn, keyring, gguf, tests.conftest" 2>&1 | tail -1 | sed 's/^/imports: /' >>"$o/steps.txt"
since unpacked
( [ -f $Q ] || { python3 -m benchmarks.hearth_speed --write-random qwen3-30b-a3b $Q.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-qwen2.gguf" && mv $Q.part $Q && sync; }
  [ -f $G ] || { python3 -m benchmarks.hearth_speed --write-random gpt-oss-20b $G.part --quant MXFP4_MOE \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" && mv $G.part $G && sync; } ) >"$o/write.txt" 2>&1 &
writer=$!
HEARTH_GPU_TESTS=1 HEARTH_Q8_0_DP4A=1 HEARTH_MOE_PREFETCH=1 timeout 120 python3 -m pytest -n 8 -q \
  -p no:cacheprovider --timeout 100 -rfE tests/kernels/test_gemv_q8_0.py tests/kernels/test_moe_gemv_gpu.py \
  tests/kernels/test_moe_gemv.py tests/engine/hearth/test_gpu.py >"$o/tests.txt" 2>&1
since "tests, switches on (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
timeout $(cap 60) python3 -m benchmarks.kernels.gemv_q8_0 >"$o/q8_0.txt" 2>&1
since "q8_0 rows (exit $?)"; grep -h "integer  4 rows x  64\|16 blocks, 4 warps, 2 stages" "$o/q8_0.txt" >>"$o/steps.txt"
for pf in 0 1; do
  HEARTH_MOE_PREFETCH=$pf timeout $(cap 60) python3 -m benchmarks.kernels.moe --tokens 1,16 --kernels-only \
    --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down" --json "$o/moe-pf$pf.json" >"$o/moe-pf$pf.txt" 2>&1
  since "moe rows prefetch=$pf (exit $?)"; grep -h "^qwen3" "$o/moe-pf$pf.txt" >>"$o/steps.txt"
done
wait $writer
timeout $(cap 60) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 --tokens 128 \
  --profile --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss (exit $?)"; grep -h "tg128\|replays\|block32\|q8_0" "$o/gpt-oss.txt" >>"$o/steps.txt"
HEARTH_Q8_0_DP4A=1 timeout $(cap 50) python3 -m benchmarks.hearth_speed $G --kv paged-f16 --depth 0 --tokens 128 \
  --profile --json "$o/gpt-oss-q8.json" >"$o/gpt-oss-q8.txt" 2>&1
since "gpt-oss Q8_0 integer (exit $?)"; grep -h "tg128\|replays\|block32\|q8_0" "$o/gpt-oss-q8.txt" >>"$o/steps.txt"
for pf in 0 1; do
  bench=""; [ $pf = 0 ] && bench=--llama-bench  # llama.cpp's figure beside, once
  HEARTH_MOE_PREFETCH=$pf timeout $(cap 60) python3 -m benchmarks.hearth_speed $Q $bench --kv paged-f16 \
    --depth 0 --tokens 128 --profile --json "$o/qwen3-pf$pf.json" >"$o/qwen3-pf$pf.txt" 2>&1
  since "qwen3 prefetch=$pf (exit $?)"; grep -h "tg128\|replays\|_expert_kernel" "$o/qwen3-pf$pf.txt" >>"$o/steps.txt"
done
mkdir -p "$o/memory"
timeout $(cap 90) python3 -m benchmarks.hearth_memory cards --cards 12 --shapes llama3-8b \
  --kv f16/f16 kivi4/rot4 --budget-s 80 --out "$o/memory" >"$o/memory/log.txt" 2>&1
since "memory (exit $?)"; tail -4 "$o/memory/log.txt" >>"$o/steps.txt"
since end
