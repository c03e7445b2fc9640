#!/usr/bin/env bash
# Session 31's second device call (one H200; carry .llama-pack and .whl; the tree of commit
# fa80206 before call 3's two changes, docs/measurements/2026-11-30-s31-call-2/README.md): a one-token step's
# routed experts in one launch (kernels/moe_one_token_ffn.py). The kernel rows (Qwen3-30B-A3B's
# gate+up and down at one token, then the one launch's shapes against the two launches,
# `benchmarks.kernels.moe --one-launch`), the GPU tests of the expert kernels, then the engine's
# step, main (one launch) against two-launches, alternately in one process
# (2026-11-30-s29-step-ab.py): Qwen3-30B-A3B tg128 (3 rounds) and at 32k kivi4/rot4 (2 rounds).
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh o2
install_wheels
since installed
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150 10) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-launch \
  --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down" --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "kernel rows (exit $?)"; grep -v -i warn "$o/moe.txt" | tail -14 >>"$o/steps.txt"
HEARTH_GPU_TESTS=1 timeout $(cap 120 10) python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_moe_one_token_ffn.py tests/kernels/test_moe_one_token.py \
  tests/kernels/test_moe_gemv_gpu.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
mkdir -p "$o/qwen3" "$o/qwen3-32k"
timeout $(cap 120 5) python3 $AB $Q "$o/qwen3" --variants main two-launches --rounds 3 \
  >"$o/qwen3.txt" 2>&1
since "qwen3 tg (exit $?)"; grep '^{' "$o/qwen3.txt" | cut -c1-150 >>"$o/steps.txt"; tail -3 "$o/qwen3.txt" | grep -v '^{' >>"$o/steps.txt"
timeout $(cap 150 5) python3 $AB $Q "$o/qwen3-32k" --variants main two-launches --rounds 2 \
  --kv kivi4/rot4 --slots 32960 --depth 32768 >"$o/qwen3-32k.txt" 2>&1
since "qwen3 32k (exit $?)"; grep '^{' "$o/qwen3-32k.txt" | cut -c1-150 >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
