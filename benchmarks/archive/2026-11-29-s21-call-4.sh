#!/usr/bin/env bash
# Session 21's fourth device call (one H200, a fresh machine; carry .llama-pack and .whl): main
# with the batch's steps launched ahead (calls 1-2) and the rows GEMV's tiles from call 3's
# sweep (Q6_K on one warp, and its one-step matrices of 4096 rows or more in the rows kernel):
#   1. the rows GEMV's GPU tests, beside the 8B file's writing;
#   2. the rows GEMV at 1, 2 and 4 rows at the new default tiles (the layer's sum);
#   3. serving in the order (1, 4, 16, 64) beside llama-server on an empty Triton
#      cache (a first start: the warm-up's new 23- and 47-prompt steps are to leave nothing
#      to compile during the levels), with what compiled after the server answered.
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( python3 -m benchmarks.hearth_speed --write-random llama3-8b $L.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" && mv $L.part $L && sync ) >"$o/write.txt" 2>&1 &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc-serve
HEARTH_GPU_TESTS=1 timeout 120 python3 -m pytest -v --tb=short -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_gemv_dp4a_rows.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -8 >>"$o/steps.txt"
TRITON_CACHE_DIR=/tmp/tc-rows timeout $(cap 90) python3 -m benchmarks.kernels.gemv_rows --rows 1,2,4 \
  --json "$o/rows.json" >"$o/rows.txt" 2>&1
since "rows (exit $?)"; grep -A4 "a Llama-3-8B layer" "$o/rows.txt" >>"$o/steps.txt"
wait $writer; grep wrote "$o/write.txt" >>"$o/steps.txt"
rm -rf /tmp/tc-serve
timeout $(cap 260) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server.txt" | tail -12 >>"$o/steps.txt"
find /tmp/tc-serve -name "*.json" ! -name "__grp__*" -printf "%TH:%TM:%TS %f\n" | sort >"$o/compiled.txt"
grep -m1 "/v1/completions" /tmp/logs/hearth-engine.log | sed 's/^/first request done: /' >>"$o/steps.txt"
tail -3 "$o/compiled.txt" | sed 's/^/last compiled: /' >>"$o/steps.txt"
since end
