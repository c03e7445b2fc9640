#!/usr/bin/env bash
# Session 42's third device call (one H200; carry .whl): the Gluon probe again with its copies
# past a split's pages masked and the query loaded once then converted; its registers and
# shared memory as compiled here; at 32,768 positions with 132, 99 and 66 splits, at 8,192;
# then Nsight Compute on the probe at 32,768.
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c3
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
PROBE=benchmarks/archive/2026-12-02-s42-gluon-split.py
for run in 32768:132 32768:99 32768:66 8192:132; do
  depth=${run%%:*}; splits=${run#*:}
  timeout $(cap 90 60) python3 $PROBE --kv-heads 4 --depth $depth --splits $splits \
    >"$o/probe-$depth-$splits.txt" 2>&1
  since "probe $run (exit $?)"; grep -v "relative\|Warn\|warn" "$o/probe-$depth-$splits.txt" \
    | tail -5 >>"$o/steps.txt"
  grep relative "$o/probe-$depth-$splits.txt" | sort -k6 | tail -1 >>"$o/steps.txt"
done
timeout $(cap 90 5) ncu --target-processes all -k regex:split_transposed --launch-skip 16 \
  --launch-count 2 python3 $PROBE --kv-heads 4 --depth 32768 --ncu >"$o/ncu.txt" 2>&1
since "ncu (exit $?)"
since end
