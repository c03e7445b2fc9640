#!/usr/bin/env bash
# (Run at commit eb82c7e, whose step A/B had the "apart" variant; the fusions were reverted after.)
# Session 40's second device call (one H200; carry .llama-pack and .whl): the GPU tests of the
# gate/up GEMV writing SwiGLU (dense) and h in 8 bits (MoE) in its own launch; then the
# engine's step with those launches put back ("apart") against main, alternately in one
# process: tg128 (256 slots) and 32k kivi4/rot4 for Qwen3-30B-A3B and Llama-3-8B.
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh c2
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 140 300) python3 -m pytest -q -p no:cacheprovider \
  tests/kernels/test_gated_matmul.py tests/kernels/test_moe_down_dp4a.py \
  tests/kernels/test_decode_launch.py "tests/kernels/test_gemv_dp4a.py::test_matches_references" \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q llama:$L; do
  tag=${m%%:*}-tg128; mkdir -p "$o/$tag"
  timeout $(cap 70 5) python3 $AB ${m#*:} "$o/$tag" --rounds 2 --replays 2 \
    --variants main apart >"$o/$tag.txt" 2>&1
  since "step $tag (exit $?)"; grep "tok/s" "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
done
for m in qwen3:$Q llama:$L; do
  tag=${m%%:*}-32k; mkdir -p "$o/$tag"
  timeout $(cap 100 5) python3 $AB ${m#*:} "$o/$tag" --rounds 1 --replays 2 --kv kivi4/rot4 \
    --slots 32832 --depth 32768 --variants main apart reduce-4-warps >"$o/$tag.txt" 2>&1
  since "step $tag (exit $?)"; grep "tok/s" "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
