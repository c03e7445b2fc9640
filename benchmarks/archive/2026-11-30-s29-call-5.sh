#!/usr/bin/env bash
# Session 29's fifth device call (one H200, a fresh machine; carry .llama-pack): a decode
# step's attention programs asking L2 for the output projection's weights once their pages are
# read (kernels/l2_prefetch.py, decode_attention's NEXT_W), against not asking, alternately in
# one process (benchmarks/archive/2026-11-30-s29-step-ab.py): Llama-3-8B and Qwen3-30B-A3B,
# tg128 (256 slots, paged f16, 3 rounds) and 32k (kivi4/rot4, 2 rounds); then the GPU tests
# of the paged cache and the engine.
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
  write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 90 -rfE \
  tests/kernels/test_kv_cache.py tests/kernels/test_l2_prefetch.py \
  tests/kernels/test_kv_write_in_attention.py tests/engine/hearth/test_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -8 >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
V="main no-wo-prefetch"
for m in llama:$L qwen3:$Q; do
  mkdir -p "$o/${m%%:*}" "$o/${m%%:*}-32k"
  timeout $(cap 100 10) python3 $AB ${m#*:} "$o/${m%%:*}" --variants $V --rounds 3 \
    >"$o/${m%%:*}.txt" 2>&1
  since "${m%%:*} tg (exit $?)"; tail -2 "$o/${m%%:*}.txt" >>"$o/steps.txt"
  timeout $(cap 120 10) python3 $AB ${m#*:} "$o/${m%%:*}-32k" --variants $V --rounds 2 \
    --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/${m%%:*}-32k.txt" 2>&1
  since "${m%%:*} 32k (exit $?)"; tail -2 "$o/${m%%:*}-32k.txt" >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
