#!/usr/bin/env bash
# Session 17, branch h17c (issue 34 item 3: ggml's CPU experts in the decode graph's host nodes
# ran ~2x slower than llama.cpp's own). One H200, about 2.5 minutes (3 with the optional steps) once llama.cpp's CUDA build
# and the Qwen3 file are there:
#
#   bash benchmarks/archive/2026-11-29-h17c-call.sh OUTDIR
#
# The fix under test: the stepping thread frees its OpenMP team before each decode step
# (expert_offload.free_main_thread_openmp), so that libgomp, which torch and ggml share, counts
# no more threads than CPUs and keeps spinning at ggml's barriers instead of sleeping at each.
# --keep-openmp-threads is the step before the fix, run back to back with it:
#   1. benchmarks/moe_offload.py hearth, Qwen3-30B-A3B Q4_K_M on a simulated 12 GiB card, 21
#      layers' experts in RAM, ggml at 15 threads (the default: the cores less one): all 8 picks
#      on the CPU, new then old; then 4 of 8 on the CPU and 4 read in place, new then old;
#   2. if time is left, the GPU tests of the host nodes (tests/engine/hearth/test_gpu.py -k
#      host_nodes: the decode graph with ggml in host nodes, whose _launch now frees the team,
#      against the experts all on the GPU);
#   3. if time is left, benchmarks/cpu_experts_openmp.py at 15 threads (no GPU): one layer's
#      ggml time called from a pthread of its own with the main thread's team kept or freed.
# Needs /tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf (written earlier in the call) and llama.cpp's
# build (benchmarks/gpu/show_env.sh builds it from .gpu-bundle/ if /tmp/llama/env.sh is missing).
set -uo pipefail
o=${1:?output folder}
mkdir -p "$o/offload"
cd "$(dirname "$0")/../.." || exit 1
OUT=$o source benchmarks/gpu/show_env.sh
start=$(date +%s)
DEADLINE=${DEADLINE_S:-180}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - 3 )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
if [ ! -f "$Q" ]; then since "no $Q: nothing run"; exit 1; fi
off() { local name=$1; shift
  if [ "$(left)" -lt 25 ]; then since "offload $name skipped (time)"; return; fi
  timeout "$(cap 45)" python3 -m benchmarks.moe_offload hearth --model $Q --card 12 \
    --ram-layers 21 --cpu-threads 15 "$@" >"$o/offload/$name.txt" 2>&1
  since "offload $name (exit $?)"
  grep '^{' "$o/offload/$name.txt" | tail -1 | python3 -c "import json, sys; r = json.load(sys.stdin); print({k: r.get(k) for k in ('ok', 'error', 'tg128_tok_s', 'host_us_per_layer_token', 'voluntary_switches_per_token', 'threads_in_process', 'openmp_threads_freed', 'openmp_libraries', 'host_function_errors')})" >>"$o/steps.txt" 2>&1
}
off cpu8-new --cpu-picks 8
off cpu8-old --cpu-picks 8 --keep-openmp-threads
off split4-new --cpu-picks 4
off split4-old --cpu-picks 4 --keep-openmp-threads
if [ "$(left)" -gt 45 ]; then
  HEARTH_GPU_TESTS=1 timeout "$(cap 60)" python3 -m pytest -q -p no:cacheprovider -rfE \
    tests/engine/hearth/test_gpu.py -k host_nodes >"$o/gpu-tests.txt" 2>&1
  since "gpu tests -k host_nodes (exit $?)"
  tail -3 "$o/gpu-tests.txt" >>"$o/steps.txt"
fi
if [ "$(left)" -gt 30 ]; then
  timeout "$(cap 60)" python3 -m benchmarks.cpu_experts_openmp --threads 15 --rounds 3 \
    --dir /tmp/cpu-experts >"$o/cpu_experts_openmp.txt" 2>&1
  since "cpu_experts_openmp (exit $?)"
  grep -v "repack tensor" "$o/cpu_experts_openmp.txt" | tail -4 >>"$o/steps.txt"
fi
