#!/usr/bin/env bash
# Session 29's seventh device call (one H200, a fresh machine; carry .llama-pack): Llama-3-8B
# at 32k with kivi4/rot4 beside llama-bench's f16 KV at that depth, three times in turn
# (`benchmarks.hearth_speed --llama-bench --tg-kv`), for the spread of the ratio (call 6: 2.02x
# against llama-bench's 170.91 tok/s; call 3: 1.90x against 178.70).
source benchmarks/gpu/call_prelude.sh o7
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
since written
export TRITON_CACHE_DIR=/tmp/tc
for r in 1 2 3; do
  [ "$(left)" -gt 60 ] || break
  timeout $(cap 90 10) python3 -m benchmarks.hearth_speed $L --llama-bench --tokens 128 --tg-kv \
    --kv kivi4/rot4 --json "$o/llama-$r.json" >"$o/llama-$r.txt" 2>&1
  since "llama round $r (exit $?)"; grep -h "depth" "$o/llama-$r.txt" >>"$o/steps.txt"
done
since end
