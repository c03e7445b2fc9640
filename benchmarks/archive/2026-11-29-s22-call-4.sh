#!/usr/bin/env bash
# Prepared at the end of session 21 (one H200; carry .llama-pack and .whl): a mixture of
# experts served on the Hearth engine beside llama-server (Best fit serves MoE models on
# llama.cpp for want of these figures: engine/planner/engine_figures.json has `serve` rows for
# the dense 8B only), Qwen3-30B-A3B-shaped Q4_K_M, greedy, the order.
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 480) python3 benchmarks/server_concurrency.py $Q --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/server-qwen3.json" >"$o/server-qwen3.txt" 2>&1
since "serving qwen3 (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server-qwen3.txt" | tail -12 >>"$o/steps.txt"
since end
