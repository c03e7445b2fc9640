#!/usr/bin/env bash
# Session 42's fourth device call (one H200; carry .whl): the Gluon probe with its key words
# swizzled in shared memory, the query read 16 bytes a thread and the output rows stored once;
# 32,768 positions at 132 and 66 splits, 8,192 at 132; Nsight Compute at 32,768 and 66 splits
# with the memory tables, warp states and the scheduler.
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c4
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
PROBE=benchmarks/archive/2026-12-02-s42-gluon-split.py
for run in 32768:132 32768:66 8192:132; do
  depth=${run%%:*}; splits=${run#*:}
  timeout $(cap 90 70) python3 $PROBE --kv-heads 4 --depth $depth --splits $splits \
    >"$o/probe-$depth-$splits.txt" 2>&1
  since "probe $run (exit $?)"; grep -v "relative\|Warn\|warn" "$o/probe-$depth-$splits.txt" \
    | tail -5 >>"$o/steps.txt"
  grep relative "$o/probe-$depth-$splits.txt" | sort -k6 | tail -1 >>"$o/steps.txt"
done
timeout $(cap 120 5) ncu --target-processes all -k regex:split_transposed --launch-skip 16 \
  --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
  --section WarpStateStats --section SchedulerStats --section Occupancy \
  python3 $PROBE --kv-heads 4 --depth 32768 --splits 66 --ncu >"$o/ncu.txt" 2>&1
since "ncu (exit $?)"
since end
