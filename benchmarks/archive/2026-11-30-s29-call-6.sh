#!/usr/bin/env bash
# Session 29's sixth device call (one H200, a fresh machine; carry .llama-pack): main as the
# session leaves it (the norm and kivi4's seal as dependent launches) beside llama-bench of the
# same build, `benchmarks.hearth_speed --llama-bench`: Qwen3-30B-A3B (tg128, pp512, 32k with
# paged f16 and kivi4/rot4), Llama-3-8B (tg128, pp512, 32k kivi4/rot4), gpt-oss-20b (tg128,
# pp512).
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
( write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
  write_random gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf $G ) &
wait; since written
export TRITON_CACHE_DIR=/tmp/tc
speed() {  # NAME MODEL ARGS...
  local name=$1 model=$2; shift 2
  timeout $(cap 150 20) python3 -m benchmarks.hearth_speed $model --llama-bench --tokens 128 \
    --json "$o/$name.json" "$@" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/$name.txt" | head -8 >>"$o/steps.txt"
}
speed qwen3 $Q --kv paged-f16 kivi4/rot4
speed llama $L --kv kivi4/rot4
speed gpt-oss $G --depth 0 --kv
since end
