#!/usr/bin/env bash
# Session 30's first device call (one H200, no llama.cpp): where decode attention's time goes at
# 32k. The split kernel under ncu (full set, source counters) for kivi4/rot4 at Llama-3-8B's
# shape (8 KV heads) and Qwen3-30B-A3B's (4), and rot4/rot4 and f16/f16 at Llama's; then the
# split and reduce times of launch shapes at both shapes (2026-11-30-s30-attention-probe.py).
source benchmarks/gpu/call_prelude.sh o1
install_wheels
since installed
export TRITON_CACHE_DIR=/tmp/tc
P=benchmarks/archive/2026-11-30-s30-attention-probe.py
ncu --version | tail -1 >>"$o/steps.txt"
for case in "kivi-llama 8 kivi4/rot4" "kivi-qwen3 4 kivi4/rot4" "rot4-llama 8 rot4/rot4" "f16-llama 8 f16/f16"; do
  set -- $case
  timeout $(cap 80 10) ncu -k regex:decode_split --launch-skip 6 --launch-count 1 --set full \
    --import-source no -f -o "$o/$1" python3 $P --ncu --kv-heads $2 --pair $3 >"$o/$1-ncu.log" 2>&1
  since "ncu $1 (exit $?)"
  ncu -i "$o/$1.ncu-rep" --page details >"$o/$1-details.txt" 2>&1
  ncu -i "$o/$1.ncu-rep" --page source --csv --print-source sass >"$o/$1-sass.csv" 2>"$o/$1-sass.err"
  since "exported $1"; rm -f "$o/$1.ncu-rep"
done
T="default warps=4 warps=4,stages=3 stages=3 stages=4 stages=7 per_sm=2 per_sm=6 per_sm=8 reduce_warps=8"
for heads in 8 4; do
  timeout $(cap 100 10) python3 $P --kv-heads $heads --pair kivi4/rot4 --tunings $T \
    >"$o/probe-kivi-$heads.txt" 2>&1
  since "probe kivi $heads (exit $?)"; cat "$o/probe-kivi-$heads.txt" >>"$o/steps.txt"
done
timeout $(cap 60 10) python3 $P --kv-heads 8 --pair rot4/rot4 --tunings default warps=4 \
  >"$o/probe-rot4-8.txt" 2>&1
since "probe rot4 (exit $?)"; cat "$o/probe-rot4-8.txt" >>"$o/steps.txt"
gzip -f "$o"/*-sass.csv
since end
