#!/usr/bin/env bash
# Session 29's fourth device call (one H200, a fresh machine; carry .llama-pack): a 32k step
# (kivi4/rot4) of Qwen3-30B-A3B and Llama-3-8B, variants alternately in one process
# (benchmarks/archive/2026-11-30-s29-step-ab.py), 2 rounds, traces in the first:
#   main (kivi4's seal a dependent launch), seal-plain (as before), the attention's split count
#   from 1, 2 or 4 programs an SM (main: as many as fit), the reduce at 8 warps;
#   then GPU tests of the kivi4 cache.
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 90 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 80 -rfE \
  tests/kernels/test_kv_kivi.py tests/kernels/test_kv_batch_rows.py tests/kernels/test_kv_cache.py \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -8 >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
V="main seal-plain per-sm-1 per-sm-2 per-sm-4 reduce-8-warps"
for m in qwen3:$Q llama:$L; do
  mkdir -p "$o/${m%%:*}"
  timeout $(cap 220 10) python3 $AB ${m#*:} "$o/${m%%:*}" --variants $V --rounds 2 \
    --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/${m%%:*}.txt" 2>&1
  since "${m%%:*} (exit $?)"; tail -6 "$o/${m%%:*}.txt" >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
