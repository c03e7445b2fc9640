#!/usr/bin/env bash
# Prepared at the end of session 21 for the next session's first call (one H200, a fresh
# machine; carry .llama-pack and .whl, both kept in the checkout: .llama-pack from
# benchmarks/gpu/pack_llama_build.sh, .whl from make_bundle.sh):
#   0. the batch's GPU tests (sampled steps launched ahead on the CUDA graphs), beside the
#      8B file's writing;
#   1. serving sampled requests (temperature 0.7, the servers' other defaults: top-k 40, top-p
#      0.95, min-p 0.05) in the order beside llama-server on an empty Triton cache:
#      the batch now draws every row on the device and launches sampled steps ahead too (not
#      measured on a GPU in session 21);
#   2. `hearth serve` on llama.cpp at one client with 1 slot and with 64 (session 21: 128.4
#      tok/s at 64 slots against llama-server's 247.2, level with it from 4 clients);
#   3. the dense 8B's tg128 with its profile, beside llama-bench (issue 35's 75% of the bound).
# (Run as session 22's first call; its second became call 2 here, Qwen3 through the worker call 3.)
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
# the batch's GPU tests first: session 21 added sampled requests launched ahead after its
# device time (test_steps_launched_ahead_on_the_graphs_..., greedy and seeded draws)
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -n 4 -v --tb=short -p no:cacheprovider --timeout 120 \
  -rfE tests/engine/hearth/test_gpu_batch.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; since written
timeout $(cap 260) python3 benchmarks/server_concurrency.py $L --llama-server "$(command -v llama-server)" \
  --hearth-engines hearth --clients 1 4 16 64 --max-tokens 512 --prompt-words 64 --ctx 1024 \
  --temperature 0.7 --rounds 1 --level-timeout 60 --logs /tmp/logs --json "$o/server-sampled.json" \
  >"$o/server-sampled.txt" 2>&1
since "serving sampled (exit $?)"; grep -h "answering\|/ llama-server\|clients" "$o/server-sampled.txt" | tail -12 >>"$o/steps.txt"
for slots in "1" "1 64"; do
  timeout $(cap 60) python3 benchmarks/server_concurrency.py $L --hearth-engines llama --clients $slots \
    --max-tokens 512 --prompt-words 64 --ctx 1024 --rounds 1 --level-timeout 30 --logs /tmp/logs \
    >"$o/llama-serve-slots-${slots// /-}.txt" 2>&1
  since "hearth serve on llama.cpp, clients $slots (exit $?)"; grep "clients=  1" "$o/llama-serve-slots-${slots// /-}.txt" >>"$o/steps.txt"
done
timeout $(cap 60) python3 -m benchmarks.hearth_speed $L --llama-bench --kv paged-f16 --depth 0 --tokens 128 \
  --profile --json "$o/llama8b.json" >"$o/llama8b.txt" 2>&1
since "llama 8b (exit $?)"; grep -h "tg128\|replays" "$o/llama8b.txt" >>"$o/steps.txt"
since end
