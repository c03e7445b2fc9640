#!/usr/bin/env bash
# Session 30's fourth device call (one H200, a fresh machine; carry .llama-pack): main with
# kivi4 keys' scales stored even channels first and the open page read by a split of its own,
# beside llama-bench of the same build (`benchmarks.hearth_speed --llama-bench`): Llama-3-8B
# and Qwen3-30B-A3B at 32k with kivi4/rot4 (and tg128, pp512); first the kivi4 and engine GPU
# tests while the models are written.
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 110 python3 -m pytest -n 6 -q -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_kv_kivi.py tests/kernels/test_kv_page_step.py tests/engine/hearth/test_gpu.py \
  tests/engine/hearth/test_gpu_batch.py tests/engine/hearth/test_verify.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -8 >>"$o/steps.txt"
wait; since written
speed() {  # NAME MODEL ARGS...
  local name=$1 model=$2; shift 2
  timeout $(cap 170 10) python3 -m benchmarks.hearth_speed $model --llama-bench --tokens 128 \
    --json "$o/$name.json" "$@" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/$name.txt" | head -8 >>"$o/steps.txt"
}
speed llama $L --kv kivi4/rot4
speed qwen3 $Q --kv kivi4/rot4
since end
