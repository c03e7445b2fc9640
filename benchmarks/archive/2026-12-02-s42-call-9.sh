#!/usr/bin/env bash
# Session 42's ninth device call (one H200; carry .whl): the Gluon probe a part a warp with each
# warp's rows rotated back from V's rotated space in the kernel (--rotate: the Hadamard
# transform's lane stages by shuffles, the others in registers, then the signs), as the engine's
# split kernel does; 32,768 positions at 66 and 132 splits, 8,192 at 66, 128 at 132.
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c9
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
PROBE=benchmarks/archive/2026-12-02-s42-gluon-split.py
for run in 32768:66 32768:132 8192:66 128:132; do
  IFS=: read -r depth splits <<<"$run"
  name=probe-$depth-$splits-parts-rotated
  timeout $(cap 80 10) python3 $PROBE --kv-heads 4 --depth $depth --splits $splits \
    --warp-parts --rotate \
    >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -v "relative\|Warn\|warn" "$o/$name.txt" | tail -5 >>"$o/steps.txt"
  grep relative "$o/$name.txt" | sort -k6 | tail -1 >>"$o/steps.txt"
done
since end
