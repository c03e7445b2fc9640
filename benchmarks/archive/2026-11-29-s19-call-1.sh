#!/usr/bin/env bash
# Session 19's first device call (one H200; carry .gpu-bundle and .whl): a fresh machine with no
# packed build, so llama.cpp is built here (about 5 minutes) and packed into $OUT for the later
# calls (.llama-pack). Beside the build, on the GPU:
#   1. every GPU test of the engine and the kernels, with -v and a per-test time limit, so that
#      each failure is named (session 17 call 3's run was cut before pytest named its 9);
#   2. ncu on the Qwen3-30B-A3B expert GEMV (gate+up, down) and the router at one token:
#      throughput, occupancy and warp stalls (issue 34: the expert GEMV at 23-36% of copy);
#   3. after the build: Qwen3-30B-A3B beside llama-bench with the step's profile (issue 34).
set -uo pipefail
R=$OUT; o=/tmp/o1; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-565}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
finish() { cp /tmp/llama/*.log "$o/" 2>/dev/null; tar czf "$R/all.tgz" -C /tmp o1; }
trap finish EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$o/gpu.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" >> "$o/gpu.txt"
command -v ncu >> "$o/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
export PYTHONPATH="$PWD:/tmp/site"
( bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1
  echo "build exit $?" >> /tmp/logs/build.txt ) &
builder=$!
since "started the build"
# the models' writer needs the vocabularies from the unpacked source
( for i in $(seq 60); do ls /tmp/llama/llama_cpp_python-*/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf >/dev/null 2>&1 && break; sleep 1; done
  v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
  for spec in "qwen3-30b-a3b Q4_K_M qwen3-30b-a3b-random-q4_k_m ggml-vocab-qwen2.gguf" \
              "llama3-8b Q4_K_M llama3-8b-random-q4_k_m ggml-vocab-llama-bpe.gguf" \
              "gpt-oss-20b MXFP4_MOE gpt-oss-20b-random-mxfp4 ggml-vocab-llama-bpe.gguf"; do
    set -- $spec; f=/tmp/models/$3.gguf
    [ -f "$f" ] || { nice python3 -m benchmarks.hearth_speed --write-random $1 "$f.part" --quant $2 --vocab "$v/$4" && mv "$f.part" "$f" && sync; }
  done ) >/tmp/logs/write.txt 2>&1 &
writer=$!
# 1. GPU tests
HEARTH_GPU_TESTS=1 timeout 300 python3 -m pytest -n 8 -v -p no:cacheprovider -p no:benchmark \
  --timeout 150 -rfE --durations 15 \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  tests/engine/hearth/test_prefill_graph.py tests/engine/hearth/test_paged_cache.py \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_check_graph.py tests/engine/hearth/test_upload.py \
  tests/kernels/ >"$o/tests.txt" 2>&1
echo "tests: exit $?" >>"$o/steps.txt"; grep -E "^(FAILED|ERROR)|passed|failed" "$o/tests.txt" | tail -30 >>"$o/steps.txt"
since tests
# 2. ncu on the expert GEMV and the router, one token
if command -v ncu >/dev/null; then
  for c in "qwen3-30b-a3b gate+up" "qwen3-30b-a3b down"; do
    n=${c// /_}; n=${n//+/}
    timeout $(cap 70) ncu -k regex:_expert_kernel --launch-skip 30 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters \
      python3 -m benchmarks.kernels.moe --tokens 1 --cases "$c" >"$o/ncu-$n.txt" 2>&1
    since "ncu $c (exit $?)"
  done
  timeout $(cap 60) ncu -k regex:router --launch-skip 30 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats python3 -m benchmarks.kernels.router >"$o/ncu-router.txt" 2>&1
  since "ncu router (exit $?)"
fi
wait $builder; tail -2 /tmp/logs/build.txt >>"$o/steps.txt"; since built
( bash benchmarks/gpu/pack_llama_build.sh "$R" >"$o/pack.txt" 2>&1 ) &
packer=$!
wait $writer; tail -4 /tmp/logs/write.txt >>"$o/steps.txt"; since files
source /tmp/llama/env.sh
export PYTHONPATH="$PYTHONPATH:/tmp/site"
# 3. Qwen3 beside llama-bench, with the step's profile
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
timeout $(cap 100) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --profile --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
wait $packer; cat "$o/pack.txt" >>"$o/steps.txt"
since end
