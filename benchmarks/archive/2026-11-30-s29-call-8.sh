#!/usr/bin/env bash
# Session 29's eighth device call (one H200; carry .llama-pack): SwiGLU as the gate/up GEMV's
# dependent launch (main) against launched after it (swiglu-plain), Llama-3-8B, alternately in
# one process (benchmarks/archive/2026-11-30-s29-step-ab.py): tg128 (3 rounds) and 32k with
# kivi4/rot4 (2 rounds); the activation's GPU tests.
source benchmarks/gpu/call_prelude.sh o8
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 60 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 50 -rfE \
  tests/kernels/test_norms_and_activations.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -4 >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
mkdir -p "$o/llama" "$o/llama-32k"
timeout $(cap 80 10) python3 $AB $L "$o/llama" --variants main swiglu-plain --rounds 3 \
  >"$o/llama.txt" 2>&1
since "llama tg (exit $?)"; tail -2 "$o/llama.txt" >>"$o/steps.txt"
timeout $(cap 100 10) python3 $AB $L "$o/llama-32k" --variants main swiglu-plain --rounds 2 \
  --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/llama-32k.txt" 2>&1
since "llama 32k (exit $?)"; tail -2 "$o/llama-32k.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
