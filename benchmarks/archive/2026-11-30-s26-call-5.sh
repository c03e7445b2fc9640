#!/usr/bin/env bash
# Session 26's fifth device call (one H200; carry .llama-pack and .whl): the disk's cold read
# rate by strategy (benchmarks/archive/2026-11-30-s26-probe5.py) on the random-block Llama-3-8B
# Q4_K_M, then both engines' loads from a cold and a warm page cache in fresh processes
# (hearth_speed --load-runs 3): issue 35's load target, main as it is.
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L
since written
df -h /tmp/models >"$o/disk.txt"; lsblk >>"$o/disk.txt" 2>&1; mount | grep -E " / | /tmp" >>"$o/disk.txt"
timeout $(cap 150) python3 benchmarks/archive/2026-11-30-s26-probe5.py $L "$o/probe5.json" \
  >"$o/probe5.txt" 2>&1
since "probe5 (exit $?)"; tail -13 "$o/probe5.txt" >>"$o/steps.txt"
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 300) python3 -m benchmarks.hearth_speed $L --load-runs 3 --json "$o/load.json" \
  >"$o/load.txt" 2>&1
since "load runs (exit $?)"; tail -25 "$o/load.txt" >>"$o/steps.txt"
