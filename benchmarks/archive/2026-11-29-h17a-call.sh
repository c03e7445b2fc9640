#!/usr/bin/env bash
# h17a (issues 34, 35): RoPE (with Qwen3's q/k norms, the biases) in the KV write's launch, one
# launch a layer fewer at decode. Run from the repository root, on one H200, in the session's
# call environment (torch 2.11 + Triton 3.6; gguf importable for the tests' reference); $1: the
# output folder. About 2.5 minutes. The variable HEARTH_KV_WRITE_ROPE (read by KernelsOps) picks
# the variant: 1 (the default) RoPE in the write, 0 RoPE's own launch then the write (main's
# launches). Whichever loses is deleted with the variable.
#   tests.txt        the compiled kernels: the fused write against its reference (every K
#                    format), RoPE, the KV cache and kivi4, the attention's step flags, the sm_90
#                    compiles, the engine's GPU tests (graph capture, a check bit for bit against
#                    decode steps)
#   kernels.txt      benchmarks.kernels kv_write_rope: the one launch ("hearth") against RoPE's
#                    launch then the write ("apart"), 1 and 4096 positions, Llama 3 8B's heads
#   {qwen3,llama}-{apart,fused}.txt   hearth_speed --profile, old against new, back to back:
#                    tg64 (graph), the eager step's kernel table (_rope_kernel 48x / 32x gone,
#                    kv_write_kernel's time per launch), pp512
set -uo pipefail
o=${1:?usage: $0 OUTPUT_FOLDER}
mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
HEARTH_GPU_TESTS=1 timeout 100 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE \
  tests/kernels/test_kv_write_rope.py tests/kernels/test_rope.py tests/kernels/test_kv_cache.py \
  tests/kernels/test_kv_kivi.py tests/kernels/test_kv_page_step.py \
  tests/kernels/test_kv_batch_rows.py tests/kernels/test_attention_compiles.py \
  tests/kernels/test_rope_compiles.py tests/engine/hearth/test_gpu.py \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_paged_cache.py \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^FAILED|^ERROR|passed|failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
timeout 40 python3 -m benchmarks.kernels --ops kv_write_rope --pairs f16/f16,q8/rot4,kivi4/rot4 \
  >"$o/kernels.txt" 2>&1
since "kernel rows (exit $?)"; grep -E "kv_write_rope" "$o/kernels.txt" | head -12 >>"$o/steps.txt"
for model in qwen3 llama; do
  m=$Q; [ "$model" = llama ] && m=$L
  [ -f "$m" ] || { echo "no $m" >>"$o/steps.txt"; continue; }
  for variant in apart fused; do
    flag=1; [ "$variant" = apart ] && flag=0
    HEARTH_KV_WRITE_ROPE=$flag timeout 50 python3 -m benchmarks.hearth_speed "$m" \
      --tg-kv paged-f16 kivi4/rot4 --kv --tokens 64 --profile \
      --json "$o/$model-$variant.json" >"$o/$model-$variant.txt" 2>&1
    since "$model $variant (exit $?)"
    grep -E "^pp512|^tg|graph replays|_rope_kernel|kv_write_kernel|decode_split|KV" \
      "$o/$model-$variant.txt" | head -12 >>"$o/steps.txt"
  done
done
cat "$o/steps.txt"
