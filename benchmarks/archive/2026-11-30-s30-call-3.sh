#!/usr/bin/env bash
# Session 30's third device call (one H200, no llama.cpp): one layer's attention at 32k as a
# graph replays it (layer us: split + reduce, chained as the engine launches them), for three
# kivi4 key readers swapped in by file (old: main's; deint: scales stored even channels first;
# new: that and the codes dequantized in their bytes' layout), each with the open page in a
# split of its own (default) and shared (open_apart=0), and unchained (each kernel's own time).
# The variant files were made before the call and carried untracked: old = kernels/kv_kivi.py
# at c8829bf, deint = at 24938dc, new = 24938dc with rot4_codes_f16(b, ASM, False) in
# kivi_page_scores (call 2's old is c8829bf's, its new this one); call 3's open_apart=0 rows ran
# with a module switch since removed (the open page shared, as at c8829bf).
source benchmarks/gpu/call_prelude.sh o3
install_wheels
since installed
export TRITON_CACHE_DIR=/tmp/tc
P=benchmarks/archive/2026-11-30-s30-attention-probe.py
T="default open_apart=0 chain=0,overlap=0 chain=0,overlap=0,open_apart=0"
for round in 1 2; do
  for v in old deint new; do
    cp benchmarks/archive/s30-old/kv_kivi_$v.py kernels/kv_kivi.py
    for heads in 8 4; do
      timeout $(cap 60 10) python3 $P --kv-heads $heads --pair kivi4/rot4 --tunings $T \
        >"$o/probe-$v-$heads-r$round.txt" 2>&1
      since "probe $v $heads round $round (exit $?)"; grep -v -i warn "$o/probe-$v-$heads-r$round.txt" >>"$o/steps.txt"
    done
  done
  T="default open_apart=0"
done
cp benchmarks/archive/s30-old/kv_kivi_new.py kernels/kv_kivi.py
HEARTH_GPU_TESTS=1 timeout $(cap 120 5) python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_kv_kivi.py tests/kernels/test_kv_cache.py tests/kernels/test_kv_cache_positions.py \
  tests/kernels/test_kv_page_step.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -12 >>"$o/steps.txt"
since end
