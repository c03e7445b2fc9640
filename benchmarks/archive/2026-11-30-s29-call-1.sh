#!/usr/bin/env bash
# Session 29's first device call (one H200, a fresh machine; carry .llama-pack): the one-token
# gate/up asking L2 for the down's picked experts (kernels/l2_prefetch.py), and where a decode
# step's time goes inside its graph (benchmarks/archive/2026-11-30-s29-step-ab.py):
#   1. the GPU tests of the prefetch and the one-token expert GEMV;
#   2. Qwen3-30B-A3B: main against main without the prefetch, alternately in one process, 3
#      rounds (tg128, graph replays), each variant's timeline of 4 replays;
#   3. Llama-3-8B: main's timeline;
#   4. llama-bench tg128 on the Qwen3 file, as time allows.
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 90 -rfE \
  tests/kernels/test_l2_prefetch.py tests/kernels/test_moe_gemv.py -k "pieces or planes or one_token" \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -8 >>"$o/steps.txt"
wait $writer; since written; ls -la /tmp/models >>"$o/steps.txt"
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
mkdir -p "$o/qwen3" "$o/llama"
timeout $(cap 260 150) python3 $AB $Q "$o/qwen3" --variants main no-down-prefetch --rounds 3 \
  >"$o/qwen3.txt" 2>&1
since "qwen3 a/b (exit $?)"; tail -2 "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 120 60) python3 $AB $L "$o/llama" --variants main --rounds 1 >"$o/llama.txt" 2>&1
since "llama timeline (exit $?)"; tail -1 "$o/llama.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
if [ "$(left)" -gt 50 ]; then
  timeout $(cap 60 5) llama-bench -m $Q -p 0 -n 128 -r 3 -fa 1 -ngl 99 -o json >"$o/llama-bench.json" 2>"$o/llama-bench.err"
  since "llama-bench (exit $?)"; grep -h '"avg_ts"' "$o/llama-bench.json" >>"$o/steps.txt"
fi
since end
