#!/usr/bin/env bash
# Session 19's last device call (one H200; carry .llama-pack and .whl), on the fixes made after
# calls 3 and 4 named the GPU tests' failures:
#   1. every GPU test of the engine and the kernels (-v): TorchOps' RoPE table on the device,
#      a failed prefill capture leaving the next capture a pool of its own;
#   2. serving at 1 4 8 16 64 clients beside llama-server with the batch warm-up of several
#      prompts a step (issue 38: the 4-client TTFT of 0.95 s in call 3); the Hearth server
#      starts on an empty Triton cache, and the kernels its Triton cache gained, with their
#      times, show what compiled after the warm-up (beside the requests' times in its log).
set -uo pipefail
R=$OUT; o=/tmp/o5; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-430}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
finish() { cp /tmp/logs/hearth-*.log /tmp/logs/*server*.log "$o/" 2>/dev/null; tar czf "$R/all.tgz" -C /tmp o5; }
trap finish EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >"$o/pip.txt" 2>&1
mkdir -p /tmp/bundle/wheels; cp .whl/gguf-*.whl .whl/diskcache-*.whl /tmp/bundle/wheels/
bash benchmarks/gpu/build_llama_cuda.sh /tmp/bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/site"
since unpacked
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( nice python3 -m benchmarks.hearth_speed --write-random llama3-8b "$L.part" --quant Q4_K_M \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" && mv "$L.part" "$L" && sync ) >/tmp/logs/write.txt 2>&1 &
writer=$!
HEARTH_GPU_TESTS=1 timeout 190 python3 -m pytest -n 12 -v -p no:cacheprovider --timeout 120 -rfE \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  tests/engine/hearth/test_prefill_graph.py tests/engine/hearth/test_paged_cache.py \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_check_graph.py tests/engine/hearth/test_upload.py \
  tests/kernels/ >"$o/tests.txt" 2>&1
echo "tests: exit $?" >>"$o/steps.txt"; grep -E "^(FAILED|ERROR)|passed|failed" "$o/tests.txt" | tail -20 >>"$o/steps.txt"
since tests
wait $writer; tail -1 /tmp/logs/write.txt >>"$o/steps.txt"; since files
export TRITON_CACHE_DIR=/tmp/tc-serve; rm -rf $TRITON_CACHE_DIR
timeout $(cap 200) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 1 4 8 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 45 --logs /tmp/logs --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; grep -h "answering\|/ llama-server" "$o/server.txt" >>"$o/steps.txt"
find /tmp/tc-serve -name "*.json" ! -name "__grp__*" -printf "%TH:%TM:%TS %f\n" | sort > "$o/compiled.txt"
tail -25 "$o/compiled.txt" >>"$o/steps.txt"; grep "completions" /tmp/logs/hearth-engine.log | head -3 >>"$o/steps.txt"
since end
