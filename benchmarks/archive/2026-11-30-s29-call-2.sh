#!/usr/bin/env bash
# Session 29's second device call (one H200, a fresh machine; carry .llama-pack): the decode
# step's launch edges (benchmarks/archive/2026-11-30-s29-step-ab.py's variants), alternately in
# one process, 3 rounds, each variant's trace of 4 replays in the first:
#   1. the GPU tests of the norm, the one-token expert GEMV and down;
#   2. Qwen3-30B-A3B: main, the norm a dependent launch, and that with the gate/up (then also
#      the down) letting the next launch in once its programs have their weights;
#   3. Llama-3-8B: main and the norm a dependent launch;
#   4. llama-bench tg128 on both files.
source benchmarks/gpu/call_prelude.sh o2
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
  tests/kernels/test_norms_and_activations.py tests/kernels/test_moe_one_token.py \
  tests/kernels/test_moe_gemv.py -k "norm or one_token or silu or down_sums" >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -8 >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
mkdir -p "$o/qwen3" "$o/llama"
timeout $(cap 240 170) python3 $AB $Q "$o/qwen3" --rounds 3 \
  --variants main norm-dependent norm-gate-up-early norm-both-early >"$o/qwen3.txt" 2>&1
since "qwen3 a/b (exit $?)"; tail -4 "$o/qwen3.txt" >>"$o/steps.txt"
timeout $(cap 120 50) python3 $AB $L "$o/llama" --rounds 3 --variants main norm-dependent \
  >"$o/llama.txt" 2>&1
since "llama a/b (exit $?)"; tail -2 "$o/llama.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
for m in $Q $L; do
  [ "$(left)" -gt 40 ] || break
  timeout $(cap 40 5) llama-bench -m $m -p 0 -n 128 -r 3 -fa 1 -ngl 99 -o json \
    >"$o/llama-bench-$(basename $m .gguf).json" 2>/dev/null
  since "llama-bench $(basename $m) (exit $?)"
  grep -h '"avg_ts"' "$o/llama-bench-$(basename $m .gguf).json" >>"$o/steps.txt"
done
since end
