#!/usr/bin/env bash
# Session 22's third call (one H200; carry .llama-pack and .whl), after call 2 (steps with a
# prompt chunk in them replayed in parts, engine/hearth/batch_chunks.py):
#   1. Qwen3-30B-A3B (random Q4_K_M) served by the Hearth engine beside llama-server, 1 / 4 /
#      16 / 64 clients, 512-token replies, an empty Triton cache: no MoE serving figure exists
#      on the Hearth engine (Best fit serves MoE on llama.cpp);
#   2. the 8B served with sampled requests (temperature 0.7) beside llama-server again (call 1
#      measured them before the steps in parts), as far as the time left goes.
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
( write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 330) python3 benchmarks/server_concurrency.py $Q --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/server-qwen3.json" >"$o/server-qwen3.txt" 2>&1
since "serving qwen3 (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server-qwen3.txt" | tail -12 >>"$o/steps.txt"
cp /tmp/logs/hearth-engine.log "$o/hearth-engine-qwen3.log" 2>/dev/null
wait
mkdir -p /tmp/logs8 && timeout $(cap 200) python3 benchmarks/server_concurrency.py $L \
  --llama-server "$(command -v llama-server)" --hearth-engines hearth --clients 1 4 16 64 \
  --max-tokens 512 --prompt-words 64 --ctx 1024 --temperature 0.7 --rounds 1 --level-timeout 40 \
  --logs /tmp/logs8 --json "$o/server-sampled.json" >"$o/server-sampled.txt" 2>&1
since "8b sampled (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server-sampled.txt" | tail -12 >>"$o/steps.txt"
cp /tmp/logs8/hearth-engine.log "$o/hearth-engine-sampled.log" 2>/dev/null
since end
