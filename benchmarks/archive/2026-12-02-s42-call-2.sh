#!/usr/bin/env bash
# Session 42's second device call (one H200; carry .whl): the Gluon probe of a transposed
# kivi4/rot4 split kernel (benchmarks/archive/2026-12-02-s42-gluon-split.py) against torch and
# beside the engine's split kernel on the same cache, Qwen3-30B-A3B's attention shape (4 KV
# heads, 8 query heads each), at 32,768 and 8,192 positions.
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c2
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
PROBE=benchmarks/archive/2026-12-02-s42-gluon-split.py
for depth in 32768 8192; do
  timeout $(cap 120 10) python3 $PROBE --kv-heads 4 --depth $depth >"$o/probe-$depth.txt" 2>&1
  since "probe $depth (exit $?)"; tail -12 "$o/probe-$depth.txt" >>"$o/steps.txt"
done
since end
