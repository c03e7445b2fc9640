#!/usr/bin/env bash
# Session 28's first device call (one H200; carry .gpu-bundle and .whl): a fresh machine with no
# packed build, so llama.cpp is built here (about 5 minutes) and packed into $OUT for the later
# calls (.llama-pack). Beside the build: the GPU tests of what changed (Triton's kept cache key
# against Triton 3.6's own, the experts read one tensor at a time, the uploader), and
# Llama-3-8B's random-block file written. After it: the load with Triton's key kept against
# hashed in every process, beside llama.cpp, cold and warm page cache
# (benchmarks/archive/2026-11-30-s28-load-ab.py, 3 rounds).
set -uo pipefail
R=$OUT; o=/tmp/o1; mkdir -p "$o" /tmp/logs /tmp/models
export PYTHONUNBUFFERED=1
start=$(date +%s)
DEADLINE=${DEADLINE_S:-565}
left() { echo $(( DEADLINE - ($(date +%s) - start) )); }
cap() { local l; l=$(( $(left) - ${2:-5} )); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
finish() { cp /tmp/llama/*.log /tmp/logs/build.txt /tmp/logs/write.txt "$o/" 2>/dev/null; tar czf "$R/all.tgz" -C /tmp o1; }
trap finish EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$o/gpu.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" >> "$o/gpu.txt"
lscpu >> "$o/gpu.txt" 2>&1; (numactl --hardware || cat /sys/devices/system/node/node*/cpulist) >> "$o/gpu.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu-bundle/wheels/*.whl >"$o/pip.txt" 2>&1
export PYTHONPATH="$PWD:/tmp/site"
( bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1
  echo "build exit $?" >> /tmp/logs/build.txt ) &
builder=$!
since "started the build"
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( for i in $(seq 60); do ls /tmp/llama/llama_cpp_python-*/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf >/dev/null 2>&1 && break; sleep 1; done
  v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
  nice python3 -m benchmarks.hearth_speed --write-random llama3-8b "$L.part" --quant Q4_K_M --vocab "$v/ggml-vocab-llama-bpe.gguf" && mv "$L.part" "$L" && sync
) >/tmp/logs/write.txt 2>&1 &
writer=$!
HEARTH_GPU_TESTS=1 timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -rfE \
  tests/kernels/test_compiler_warmup.py tests/engine/hearth/test_upload.py \
  tests/engine/hearth/test_gpu.py \
  >"$o/tests.txt" 2>&1
echo "tests: exit $?" >>"$o/steps.txt"; grep -E "^(FAILED|ERROR)|passed|failed" "$o/tests.txt" | tail -20 >>"$o/steps.txt"
since tests
wait $builder; tail -2 /tmp/logs/build.txt >>"$o/steps.txt"; since built
bash benchmarks/gpu/pack_llama_build.sh "$R" >"$o/pack.txt" 2>&1
cat "$o/pack.txt" >>"$o/steps.txt"; since packed
wait $writer; tail -2 /tmp/logs/write.txt >>"$o/steps.txt"; since written
source /tmp/llama/env.sh
export PYTHONPATH="$PYTHONPATH:/tmp/site"
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 300 3) python3 benchmarks/archive/2026-11-30-s28-load-ab.py $L "$o/load-ab.json" 3 \
  >"$o/load-ab.txt" 2>&1
since "load a/b (exit $?)"; tail -9 "$o/load-ab.txt" >>"$o/steps.txt"
