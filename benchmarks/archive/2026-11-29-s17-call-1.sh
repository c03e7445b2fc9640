#!/usr/bin/env bash
# Session 17, call 1 (one H200; carry .llama-pack, .whl, .gpu-bundle/wheels and .old, a copy of
# e38cea1's engine/kernels/benchmarks/testkit): the open questions of session 16's call 4.
#   1. which host (lscpu), then Qwen3-30B-A3B pp512 on main and on e38cea1 (call 1's tree plus
#      ROWS_WON) back to back, A-B-A, beside llama-bench's pp512: a regression or the host?
#   2. experts in RAM on a simulated 12 GiB card (21 layers): in place, then all picks on the CPU
#      in host nodes with ggml at 8 and 12 threads (oversubscription?), then a 4/4 split at 8;
#   3. the memory rows h16m left (control without expandable segments, Qwen3 kivi4/rot4 cards).
set -uo pipefail
R=$OUT; o=/tmp/o1; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-560}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
{ lscpu | head -20; free -g; nproc; } >"$o/host.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  || tail -20 /tmp/logs/build.txt >>"$o/steps.txt"
OUT=$o source benchmarks/gpu/show_env.sh
export PYTHONPATH="$PYTHONPATH:/tmp/site"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.sm --format=csv,noheader
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >"$o/gpu.txt" 2>&1
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
random_model $Q qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf >/tmp/logs/write.txt 2>&1
since "qwen3 written"
# 1. pp512: llama-bench, then main / e38cea1 / main
timeout $(cap 40) llama-bench -m $Q -p 512 -n 0 -fa 1 -r 3 -ngl 99 >"$o/llama-pp.txt" 2>&1
since "llama-bench pp512 (exit $?)"
pp() { timeout $(cap 70) python3 -m benchmarks.hearth_speed $Q --kv paged-f16 --depth 0 --tokens 16 \
  --profile --json "$o/pp-$1.json" >"$o/pp-$1.txt" 2>&1; since "pp $1 (exit $?)"; }
pp main-a
( cd .old && PYTHONPATH="$PWD:/tmp/site" pp old )
pp main-b
grep -h "pp512\|load " "$o"/pp-*.txt >>"$o/steps.txt"
# 2. experts in RAM
mkdir -p "$o/offload"
off() { local name=$1; shift
  timeout $(cap 60) python3 -m benchmarks.moe_offload hearth --model $Q --card 12 --ram-layers 21 \
    "$@" >"$o/offload/$name.txt" 2>&1
  since "offload $name (exit $?)"; tail -c 600 "$o/offload/$name.txt" >>"$o/steps.txt"; echo >>"$o/steps.txt"; }
off inplace --cpu-picks 0
off cpu8 --cpu-picks 8 --cpu-threads 8
off cpu12 --cpu-picks 8 --cpu-threads 12
off split4-t8 --cpu-picks 4 --cpu-threads 8
# 3. memory rows left from h16m
if [ "$(left)" -gt 100 ]; then
  DEADLINE_S=$(( $(left) - 10 )) bash benchmarks/archive/2026-11-29-h16m-call.sh "$o/memory" >/tmp/logs/mem.txt 2>&1
  since "memory (exit $?)"
fi
tar czf "$R/all.tgz" -C /tmp o1
