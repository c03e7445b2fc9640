#!/usr/bin/env bash
# Session 20's third device call (one H200, a fresh machine; carry .llama-pack and .whl): main
# after call 2's decisions (Q8_0 at one row through the integer GEMV by default, in the 2 x 64 x 2
# tile; the expert GEMV's L2 prefetch deleted):
#   1. the GPU tests of what changed, -v with short tracebacks (call 2's run with the switches on
#      had three failures it did not name);
#   2. gpt-oss-20b's decode with the default tile, beside llama-bench (issue 34: 1.5x);
#   3. the dense 8B's decode and its share of the bound, beside llama-bench (issue 35: 75%);
#   4. serving at 1 4 8 16 64 clients on an empty Triton cache, with what compiled after the
#      server answered (issue 38; the batch warm-up's ladder).
set -uo pipefail
R=$OUT; o=/tmp/o3; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-560}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
finish() { cp /tmp/logs/hearth-*.log /tmp/logs/*server*.log "$o/" 2>/dev/null; tar czf "$R/all.tgz" -C /tmp o3; }
trap finish EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >"$o/pip.txt" 2>&1
mkdir -p /tmp/bundle/wheels; cp .whl/gguf-*.whl .whl/diskcache-*.whl /tmp/bundle/wheels/
bash benchmarks/gpu/build_llama_cuda.sh /tmp/bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/site"
python3 -c "import fastapi, uvicorn, keyring, gguf, tests.conftest" 2>&1 | tail -1 | sed 's/^/imports: /' >>"$o/steps.txt"
since unpacked
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
( [ -f $L ] || { python3 -m benchmarks.hearth_speed --write-random llama3-8b $L.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" && mv $L.part $L && sync; }
  [ -f $G ] || { python3 -m benchmarks.hearth_speed --write-random gpt-oss-20b $G.part --quant MXFP4_MOE \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" && mv $G.part $G && sync; } ) >"$o/write.txt" 2>&1 &
writer=$!
HEARTH_GPU_TESTS=1 timeout 130 python3 -m pytest -n 8 -v --tb=short -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_gemv_q8_0.py tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_gemv.py \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_kernels_ops.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; cat "$o/write.txt" | grep wrote >>"$o/steps.txt"
timeout $(cap 60) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 --tokens 128 \
  --profile --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss (exit $?)"; grep -h "tg128\|replays\|q8_0_dp4a\|block32" "$o/gpt-oss.txt" >>"$o/steps.txt"
timeout $(cap 60) python3 -m benchmarks.hearth_speed $L --llama-bench --kv paged-f16 --depth 0 --tokens 128 \
  --profile --json "$o/llama8b.json" >"$o/llama8b.txt" 2>&1
since "llama 8b (exit $?)"; grep -h "tg128\|replays" "$o/llama8b.txt" >>"$o/steps.txt"
rm -rf /tmp/tc-serve
TRITON_CACHE_DIR=/tmp/tc-serve timeout $(cap 160) python3 benchmarks/server_concurrency.py $L \
  --llama-server "$(command -v llama-server)" --hearth-engines hearth --clients 1 4 8 16 64 \
  --max-tokens 512 --prompt-words 64 --ctx 1024 --rounds 1 --level-timeout 45 --logs /tmp/logs \
  --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; grep -h "answering\|/ llama-server" "$o/server.txt" >>"$o/steps.txt"
find /tmp/tc-serve -name "*.json" ! -name "__grp__*" -printf "%TH:%TM:%TS %f\n" | sort >"$o/compiled.txt"
since end
