#!/usr/bin/env bash
# Session 29's third device call (one H200, a fresh machine; carry .llama-pack): main with the
# norm as a dependent launch, measured beside llama-bench of the same build:
#   1. GPU tests: the norm, the engine on the GPU (dense and MoE, graphs and batches);
#   2. Qwen3-30B-A3B: tg128, pp512, 32k with paged f16 and kivi4/rot4, beside llama-bench;
#   3. Llama-3-8B: the same with kivi4/rot4 at 32k;
#   4. gpt-oss-20b: tg128 and pp512 beside llama-bench;
#   5. traces of 32k steps (kivi4/rot4) of Qwen3 and Llama-3-8B, as time allows.
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
  write_random gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf $G ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 110 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_norms_and_activations.py tests/engine/hearth/test_gpu.py \
  tests/engine/hearth/test_kernels_moe.py tests/engine/hearth/test_gpu_batch.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
wait $writer; since written
speed() {  # NAME MODEL ARGS...
  local name=$1 model=$2; shift 2
  timeout $(cap 150 20) python3 -m benchmarks.hearth_speed $model --llama-bench --tokens 128 \
    --json "$o/$name.json" "$@" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/$name.txt" | head -8 >>"$o/steps.txt"
}
speed qwen3 $Q --kv paged-f16 kivi4/rot4
speed llama $L --kv kivi4/rot4
speed gpt-oss $G --depth 0 --kv
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
mkdir -p "$o/qwen3-32k" "$o/llama-32k"
for m in qwen3:$Q llama:$L; do
  [ "$(left)" -gt 60 ] || break
  timeout $(cap 60 5) python3 $AB ${m#*:} "$o/${m%%:*}-32k" --variants main --rounds 1 \
    --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/${m%%:*}-32k.txt" 2>&1
  since "${m%%:*} 32k trace (exit $?)"; tail -1 "$o/${m%%:*}-32k.txt" >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
