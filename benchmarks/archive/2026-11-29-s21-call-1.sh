#!/usr/bin/env bash
# Session 21's first device call (one H200, a fresh machine; carry .llama-pack and .whl): the
# batch decoder's steps launched ahead (engine/runtime/hearth_batch.py: the next decode step
# replayed before the last one's tokens reach the host, its input their argmax on the device):
#   1. the batch's GPU tests, the new one (launched ahead on the CUDA graphs against a step at
#      a time) among them, beside the 8B file's writing;
#   2. serving in the order (1, 4, 16, 64 clients) on an empty Triton cache, beside
#      llama-server (issue 38);
#   3. the same levels with the steps one at a time (`_greedy_alone` patched to False here, as
#      main was before), on the Triton cache step 2 filled: the change measured old against new.
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( python3 -m benchmarks.hearth_speed --write-random llama3-8b $L.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" && mv $L.part $L && sync ) >"$o/write.txt" 2>&1 &
writer=$!
HEARTH_TEST_VOCAB="$v/ggml-vocab-llama-bpe.gguf" HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest \
  -n 4 -v --tb=short -p no:cacheprovider --timeout 120 -rfE tests/engine/hearth/test_gpu_batch.py \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; grep wrote "$o/write.txt" >>"$o/steps.txt"
serve() {  # NAME SECONDS [--llama-server PATH]
  local name=$1 t=$2; shift 2
  TRITON_CACHE_DIR=/tmp/tc-serve timeout $(cap "$t") python3 benchmarks/server_concurrency.py $L \
    "$@" --hearth-engines hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
    --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/$name.json" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/$name.txt" | tail -12 >>"$o/steps.txt"
}
rm -rf /tmp/tc-serve
serve server-ahead 250 --llama-server "$(command -v llama-server)"
find /tmp/tc-serve -name "*.json" ! -name "__grp__*" -printf "%TH:%TM:%TS %f\n" | sort >"$o/compiled.txt"
mkdir -p "$o/ahead-logs"; cp /tmp/logs/hearth-*.log "$o/ahead-logs/"
cp engine/runtime/hearth_batch.py /tmp/hearth_batch.py
sed -i 's/    return gen.sampler.plain_greedy and not gen.top_logprobs_wanted/    return False/' engine/runtime/hearth_batch.py
grep -c "    return False" engine/runtime/hearth_batch.py | sed 's/^/patched lines: /' >>"$o/steps.txt"
serve server-one-at-a-time 200
cp /tmp/hearth_batch.py engine/runtime/hearth_batch.py
since end
