#!/usr/bin/env bash
# Session 42's fifth device call (one H200; carry .whl): the Gluon probe with V's scale rows
# copied once a row, at 32,768 positions with 66, 88 and 132 splits and at 8,192 with 132;
# each beside the engine's split kernel and reduce, chained as the engine launches them and
# launched plainly (the split kernel's own time).
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c5
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
PROBE=benchmarks/archive/2026-12-02-s42-gluon-split.py
for run in 32768:66 32768:88 32768:132 8192:132; do
  depth=${run%%:*}; splits=${run#*:}
  timeout $(cap 90 10) python3 $PROBE --kv-heads 4 --depth $depth --splits $splits \
    >"$o/probe-$depth-$splits.txt" 2>&1
  since "probe $run (exit $?)"; grep -v "relative\|Warn\|warn" "$o/probe-$depth-$splits.txt" \
    | tail -5 >>"$o/steps.txt"
  grep relative "$o/probe-$depth-$splits.txt" | sort -k6 | tail -1 >>"$o/steps.txt"
done
since end
