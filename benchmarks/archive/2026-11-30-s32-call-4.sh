#!/usr/bin/env bash
# Session 32's fourth device call (one H200; carry .llama-pack and .whl): why the split's ggml
# repack buffers get no huge pages (2026-11-30-s32-huge-page-probe.py after a load of
# Qwen3-30B-A3B with 20 layers' experts in RAM: split 3 of 8, every pick on the CPU, and the
# split with THP turned back on for the process before the load).
export DEADLINE_S=300
source benchmarks/gpu/call_prelude.sh c4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
P=benchmarks/archive/2026-11-30-s32-huge-page-probe.py
for how in "split" "cpu" "split --thp-on"; do
  timeout $(cap 80 5) python3 $P $Q $how >>"$o/probe.txt" 2>"$o/probe-err-${how// /}.txt"
  since "probe $how (exit $?)"
done
grep -h '^{' "$o/probe.txt" | python3 -c "
import json,sys
for line in sys.stdin:
    r=json.loads(line); r.pop('first_mappings'); print(json.dumps(r)[:900])" >>"$o/steps.txt"
since end
