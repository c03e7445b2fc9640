#!/usr/bin/env bash
# Session 21's sixth device call (one H200, a fresh machine; carry .llama-pack and .whl; the
# session's last 238 s of device time): the 4-client level alone, three rounds, beside
# llama-server (calls 4 and 5 ran it once each in the order: 1.77x and 1.49x).
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
python3 -m benchmarks.hearth_speed --write-random llama3-8b $L.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-llama-bpe.gguf" >"$o/write.txt" 2>&1 && mv $L.part $L && sync
since written
timeout $(cap 400) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 4 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 3 --level-timeout 60 --logs /tmp/logs --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server.txt" | tail -12 >>"$o/steps.txt"
