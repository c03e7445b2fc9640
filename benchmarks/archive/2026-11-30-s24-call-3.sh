#!/usr/bin/env bash
# Session 24's third device call (one H200, a fresh machine; carry .llama-pack and .whl): main as
# it will be submitted. Calls 1-2 kept the K/V row written by the attention's own launch only
# where it won (no head norms, at most 4 query heads a KV head: Llama-3-8B); here
#   1. the GPU tests of what changed (the write's bits against the two launches; a speculative
#      check against decode steps in the paged cache, llama's steps now writing in the
#      attention's launch; the engine's);
#   2. Llama-3-8B decode with the write in the attention and with it off (the rule's group limit
#      set to 0 in the benchmark's process, `off` below), alternately, at tg128 twice each and
#      at 32k f16 once each; then main beside llama-bench (pp512, tg128, 32k f16, kivi4/rot4);
#   3. Qwen3-30B-A3B beside llama-bench (the write's own launch there, as before).
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
  write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 140 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 130 -rfE \
  tests/kernels/test_kv_write_in_attention.py tests/kernels/test_kv_write_rope.py \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_paged_cache.py \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_kernels_ops.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -14 >>"$o/steps.txt"
wait $writer; since written
# benchmarks.hearth_speed with the write in the attention on, or off (the rule's group limit 0)
cat >/tmp/speed.py <<'PY'
import sys

import engine.hearth.attention_block as block
from benchmarks.hearth_speed import main

if sys.argv[1] == "off":
    block.WRITE_IN_ATTENTION_MAX_GROUP = 0
raise SystemExit(main(sys.argv[2:]))
PY
for run in a b; do
  for mode in off on; do
    timeout $(cap 75) python3 /tmp/speed.py $mode $L --kv paged-f16 --depth 0 --tokens 128 \
      --profile --json "$o/llama8b-$mode$run.json" >"$o/llama8b-$mode$run.txt" 2>&1
    since "llama 8b $mode run $run (exit $?)"
    grep -h "tg128\|replays\|kv_write\|decode_split" "$o/llama8b-$mode$run.txt" >>"$o/steps.txt"
  done
done
for mode in off on; do
  timeout $(cap 75) python3 /tmp/speed.py $mode $L --kv paged-f16 --tokens 64 \
    --json "$o/llama8b-32k-$mode.json" >"$o/llama8b-32k-$mode.txt" 2>&1
  since "llama 8b 32k $mode (exit $?)"; grep -h "depth" "$o/llama8b-32k-$mode.txt" >>"$o/steps.txt"
done
timeout $(cap 80) python3 -m benchmarks.hearth_speed $L --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --json "$o/llama8b.json" >"$o/llama8b.txt" 2>&1
since "llama 8b beside llama-bench (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/llama8b.txt" >>"$o/steps.txt"
timeout $(cap 90) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 beside llama-bench (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
since end
