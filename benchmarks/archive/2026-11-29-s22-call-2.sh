#!/usr/bin/env bash
# Session 22's second call (one H200; carry .llama-pack and .whl): a batch step with a prompt
# chunk in it now runs as parts replayed from CUDA graphs (engine/hearth/batch_chunks.py);
# call 1 measured the first token at one client 155 ms against llama-server's 89, and the
# 4-client level's decode held back by those eager steps (1.49x).
#   0. the batch's GPU tests (the parts against one eager pass) and the prefill graphs' tests
#      (their capture check moved), beside the 8B file's writing;
#   1. greedy serving in the order, all three servers, on an empty Triton cache;
#   2. 4 clients, 3 rounds, llama-server and the Hearth engine (the level on its target).
source benchmarks/gpu/call_prelude.sh o2
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -n 4 -v --tb=short -p no:cacheprovider --timeout 120 \
  -rfE tests/engine/hearth/test_gpu_batch.py tests/engine/hearth/test_prefill_graph.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; since written
# a failed test stops the call here: the servers would run the failing code
grep -qE "^(FAILED|ERROR)" "$o/tests.txt" && { since "stopped: a test failed"; exit 1; }
timeout $(cap 290) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines llama hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server.txt" | tail -16 >>"$o/steps.txt"
mkdir -p /tmp/logs4 && timeout $(cap 200) python3 benchmarks/server_concurrency.py $L \
  --llama-server "$(command -v llama-server)" --hearth-engines hearth --clients 4 --max-tokens 512 \
  --prompt-words 64 --ctx 1024 --rounds 3 --level-timeout 60 --logs /tmp/logs4 \
  --json "$o/server-4x3.json" >"$o/server-4x3.txt" 2>&1
since "4 clients, 3 rounds (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server-4x3.txt" | tail -6 >>"$o/steps.txt"
cp /tmp/logs4/hearth-engine.log "$o/hearth-engine-4x3.log" 2>/dev/null
since end
