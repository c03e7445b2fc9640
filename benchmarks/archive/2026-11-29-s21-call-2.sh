#!/usr/bin/env bash
# Session 21's second device call (one H200, a fresh machine; carry .llama-pack and .whl): the
# batch decoder's steps launched ahead, old against new without the server's order in the way
# (call 1 ran the server with them first on an empty Triton cache, then without on a warm one):
#   1. in process (benchmarks/hearth_batch_decode.py --one-at-a-time): each level launched
#      ahead, then a step at a time, on the same model and cache;
#   2. serving in the order (1, 4, 16, 64) beside llama-server, launched ahead, on the
#      Triton cache step 1 filled (the warm-up now also takes 23 and 47 prompts in one step:
#      call 1 compiled two dequantizing-MMA shapes during its 64-client level);
#   3. the same levels a step at a time (`launch_ahead = False` patched here).
source benchmarks/gpu/call_prelude.sh o2
install_wheels
llama_from_pack
since unpacked
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
python3 -m benchmarks.hearth_speed --write-random llama3-8b $L.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" >"$o/write.txt" 2>&1 && mv $L.part $L && sync
since written
export TRITON_CACHE_DIR=/tmp/tc-serve
timeout $(cap 200) python3 -m benchmarks.hearth_batch_decode $L --clients 1 4 16 64 --max-tokens 512 \
  --one-at-a-time >"$o/in-process.txt" 2>&1
since "in process (exit $?)"; grep "hearth-batch" "$o/in-process.txt" >>"$o/steps.txt"
serve() {  # NAME SECONDS [--llama-server PATH]
  local name=$1 t=$2; shift 2
  timeout $(cap "$t") python3 benchmarks/server_concurrency.py $L \
    "$@" --hearth-engines hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
    --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/$name.json" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/$name.txt" | tail -12 >>"$o/steps.txt"
  mkdir -p "$o/$name-logs"; cp /tmp/logs/hearth-*.log /tmp/logs/*server*.log "$o/$name-logs/" 2>/dev/null
}
before=$(date +%H:%M:%S)
serve server-ahead 150 --llama-server "$(command -v llama-server)"
echo "compiled after $before (the server's start included):" >"$o/compiled.txt"
find /tmp/tc-serve -name "*.json" ! -name "__grp__*" -newermt "$before" -printf "%TH:%TM:%TS %f\n" | sort >>"$o/compiled.txt"
cp engine/runtime/hearth_batch.py /tmp/hearth_batch.py
sed -i 's/^    launch_ahead = True$/    launch_ahead = False/' engine/runtime/hearth_batch.py
grep -c "^    launch_ahead = False" engine/runtime/hearth_batch.py | sed 's/^/patched lines: /' >>"$o/steps.txt"
serve server-one-at-a-time 100
cp /tmp/hearth_batch.py engine/runtime/hearth_batch.py
since end
