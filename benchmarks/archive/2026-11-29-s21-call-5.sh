#!/usr/bin/env bash
# Session 21's fifth device call (one H200, a fresh machine; carry .llama-pack and .whl): the
# issue's serving table whole, in its order (1, 4, 16, 64 clients) on an empty Triton cache:
# llama-server, `hearth serve` on llama.cpp and `hearth serve` on the Hearth engine (main with
# the steps launched ahead, the rows GEMV's new tiles, and the warm-up's 6-prompt step: call 4
# compiled the per-row GEMV for the output matrix's 5-7 rows during its 16-client level), with
# what compiled after the server answered.
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
python3 -m benchmarks.hearth_speed --write-random llama3-8b $L.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" >"$o/write.txt" 2>&1 && mv $L.part $L && sync
since written
export TRITON_CACHE_DIR=/tmp/tc-serve
rm -rf /tmp/tc-serve
timeout $(cap 480) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines llama hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server.txt" | tail -20 >>"$o/steps.txt"
find /tmp/tc-serve -name "*.json" ! -name "__grp__*" -printf "%TH:%TM:%TS %f\n" | sort >"$o/compiled.txt"
grep -m1 "/v1/completions" /tmp/logs/hearth-engine.log | sed 's/^/first request done: /' >>"$o/steps.txt"
tail -3 "$o/compiled.txt" | sed 's/^/last compiled: /' >>"$o/steps.txt"
since end
