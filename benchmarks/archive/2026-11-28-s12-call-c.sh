#!/usr/bin/env bash
# Session 12, call C (one H200, after call B): llama.cpp from call B's machine (/tmp/llama) or
# its packed build (.llama-prebuilt/, carried) or built again; then the Hearth engine's
# continuous batching beside llama-server (benchmarks/hearth_batch_show.sh) and the MoE experts
# in RAM on a simulated 12 GiB card beside llama-bench's --n-cpu-moe settings
# (benchmarks/moe_offload_show.sh) with their GPU tests. The outputs are gathered into eight
# files at most.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
if [ ! -f /tmp/llama/env.sh ]; then
  if ls .llama-prebuilt/llama-build.tar.xz.* >/dev/null 2>&1; then
    cat .llama-prebuilt/llama-build.tar.xz.* | xz -d | tar -xf - -C /
    echo "llama.cpp unpacked from call B's build" >>"$out/c.log"
  else
    bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >>"$out/c.log" 2>&1
  fi
fi
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH"
echo "llama.cpp ready after $(( $(date +%s) - start )) s" | tee -a "$out/c.log"
mkdir -p /tmp/c-batch /tmp/c-offload
OUT=/tmp/c-batch timeout 300 bash benchmarks/hearth_batch_show.sh
echo "batch show done after $(( $(date +%s) - start )) s" | tee -a "$out/c.log"
OUT=/tmp/c-offload timeout 230 bash benchmarks/moe_offload_show.sh
echo "offload show done after $(( $(date +%s) - start )) s" | tee -a "$out/c.log"
HEARTH_GPU_TESTS=1 timeout 45 python3 -m pytest -q -p no:cacheprovider tests/engine/hearth/test_gpu.py \
  -k "experts_in_ram or read_in_place" 2>&1 | tail -15 >>"$out/c.log"
cp /tmp/c-batch/server-concurrency.txt "$out/batch-server-concurrency.txt" 2>/dev/null
cp /tmp/c-batch/server-concurrency.json "$out/batch-server-concurrency.json" 2>/dev/null
head -60 /tmp/c-batch/hearth-engine.log >"$out/batch-hearth-engine-head.log" 2>/dev/null
tail -60 /tmp/c-batch/hearth-engine.log >>"$out/batch-hearth-engine-head.log" 2>/dev/null
cp /tmp/c-offload/moe_offload.txt "$out/offload.txt" 2>/dev/null
cp /tmp/c-offload/moe_offload.json "$out/offload.json" 2>/dev/null
cat /tmp/c-batch/gpu.txt /tmp/c-offload/gpu.txt >>"$out/c.log" 2>/dev/null
ls /tmp/c-batch /tmp/c-offload >>"$out/c.log"
echo "all done after $(( $(date +%s) - start )) s" | tee -a "$out/c.log"
