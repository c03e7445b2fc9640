#!/usr/bin/env bash
# Session 30's second device call (one H200, no llama.cpp): kivi4 keys dequantized in their
# bytes' layout with the scales stored even channels first (kernels/kv_kivi.py), beside the
# kernel before (benchmarks/archive/s30-old/kv_kivi.py, swapped in for its runs): one layer's
# split and reduce at 32k at both shapes and several launch shapes; then the KV cache's and
# the engine's kivi4 GPU tests.
# The variant files were made before the call and carried untracked (benchmarks/archive/
# s30-old/kv_kivi.py: kernels/kv_kivi.py at c8829bf); "new" was the working tree: scales
# stored even channels first and rot4_codes_f16(b, ASM, False) in kivi_page_scores, the open
# page still shared. The probe then had no `layer` column (its per-kernel times include the
# waits of chained launches).
source benchmarks/gpu/call_prelude.sh o2
install_wheels
since installed
export TRITON_CACHE_DIR=/tmp/tc
P=benchmarks/archive/2026-11-30-s30-attention-probe.py
T="default stages=3 stages=4 per_sm=4 per_sm=5 per_sm=6 warps=4"
cp kernels/kv_kivi.py /tmp/new_kv_kivi.py
for round in 1 2; do
  for v in new old; do
    if [ $v = old ]; then cp benchmarks/archive/s30-old/kv_kivi.py kernels/kv_kivi.py; else cp /tmp/new_kv_kivi.py kernels/kv_kivi.py; fi
    for heads in 8 4; do
      [ $round = 2 ] && T2="default" || T2="$T"
      timeout $(cap 70 10) python3 $P --kv-heads $heads --pair kivi4/rot4 --tunings $T2 \
        >"$o/probe-$v-$heads-r$round.txt" 2>&1
      since "probe $v $heads round $round (exit $?)"; grep -v Warn "$o/probe-$v-$heads-r$round.txt" | grep -v _warn >>"$o/steps.txt"
    done
  done
done
cp /tmp/new_kv_kivi.py kernels/kv_kivi.py
HEARTH_GPU_TESTS=1 timeout $(cap 200 10) python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 150 -rfE \
  tests/kernels/test_kv_kivi.py tests/kernels/test_kv_cache.py tests/kernels/test_kv_cache_positions.py \
  tests/kernels/test_kv_page_step.py tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
since end
