#!/usr/bin/env bash
# Session 33's seventh device call (one H200, nothing carried): kernels/host_published's
# benchmark (ggml's sum read from pinned memory and added, against copying it in and adding).
export DEADLINE_S=100
source benchmarks/gpu/call_prelude.sh c7
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 80 5) python3 -m benchmarks.kernels.host_published >$o/host_published.txt 2>&1
since "host_published (exit $?)"; cat $o/host_published.txt >>$o/steps.txt
