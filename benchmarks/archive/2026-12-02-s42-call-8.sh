#!/usr/bin/env bash
# Session 42's eighth device call (one H200; carry .whl): the engine's decode reduce alone over
# 132 (the engine's splits at 32k), 256, 264 and 528 parts a query row (the Gluon probe's 66 or
# 132 splits written a part a warp), Qwen3-30B-A3B's 32 query heads.
export DEADLINE_S=200
source benchmarks/gpu/call_prelude.sh c8
install_wheels
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 120 10) python3 benchmarks/archive/2026-12-02-s42-reduce-parts.py \
  --parts 132 256 264 528 >"$o/reduce.txt" 2>&1
since "reduce (exit $?)"; grep parts "$o/reduce.txt" >>"$o/steps.txt"
since end
