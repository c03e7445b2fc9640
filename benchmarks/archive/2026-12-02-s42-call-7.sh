#!/usr/bin/env bash
# Session 42's seventh device call (one H200; carry .whl): the Gluon probe with the first pages'
# copies issued before the query's conversion, its warps' softmaxes merged in the kernel or
# written a part a warp (--warp-parts, no merge: the reduce would take 4 times the parts);
# 32,768 positions at 66 and 132 splits, 128 positions at 132.
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c7
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
PROBE=benchmarks/archive/2026-12-02-s42-gluon-split.py
for run in 32768:66: 32768:66:--warp-parts 32768:132:--warp-parts 128:132: 128:132:--warp-parts; do
  IFS=: read -r depth splits flag <<<"$run"
  name=probe-$depth-$splits${flag:+-parts}
  timeout $(cap 80 10) python3 $PROBE --kv-heads 4 --depth $depth --splits $splits $flag \
    >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -v "relative\|Warn\|warn" "$o/$name.txt" | tail -5 >>"$o/steps.txt"
  grep relative "$o/$name.txt" | sort -k6 | tail -1 >>"$o/steps.txt"
done
since end
