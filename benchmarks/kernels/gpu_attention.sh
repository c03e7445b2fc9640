#!/usr/bin/env bash
# The KV cache's part of the kernels' Show run, kernels only (no llama.cpp), in about 3 minutes
# on an H100: the KV cache's tests at full size on the GPU (positions, sliding window, CUDA
# graph replay, every format pair, each step switch), then decode attention at 4k / 32k / 128k
# for each K/V pair beside our f16 in the same run, the KV write and gather, and a
# sliding-window figure. SWEEP=32768 adds the launch-shape sweep at that depth (SWEEP_PAIRS:
# its K/V pairs). TEST_S=0 / WINDOW_S=0 skip the tests / the sliding-window figure.
# gpu_show.sh runs this with PART=attention, beside llama-bench's figures. Results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="${PYTHONPATH:-}:$PWD"
SECONDS=0
if [ "${TEST_S:-100}" != 0 ]; then
  timeout "${TEST_S:-100}" python3 -m pytest tests/kernels/test_kv_kivi.py tests/kernels/test_kv_cache.py \
    tests/kernels/test_kv_cache_positions.py tests/kernels/test_kv_page_step.py ${ENGINE_TESTS:-} \
    -v -p no:cacheprovider >"$out/attention-tests.log" 2>&1
  echo "== tests ($SECONDS s): $(grep -c PASSED "$out/attention-tests.log") passed"
  grep -E "FAILED|ERROR|passed|failed" "$out/attention-tests.log" | tail -15
fi
pairs=${PAIRS:-f16/f16,q8/q8,rot4/rot4,q8/rot4,rot2/rot4,kivi4/rot4}
if [ -n "${SWEEP:-}" ]; then
  timeout "${SWEEP_S:-90}" python3 -m benchmarks.kernels --ops decode_attention \
    --pairs "${SWEEP_PAIRS:-f16/f16,rot4/rot4,q8/rot4,kivi4/rot4}" --contexts 4096 \
    --attention-sweep "$SWEEP" --json "$out/attention-sweep.json" >"$out/attention-sweep.txt" 2>&1
  echo "== sweep ($SECONDS s)"; tail -40 "$out/attention-sweep.txt"
fi
timeout "${BENCH_S:-100}" python3 -m benchmarks.kernels --ops decode_attention,kv_write,kv_gather \
  --pairs "$pairs" ${BENCH_ARGS:-} --json "$out/attention.json" >"$out/attention.txt" 2>&1
echo "== attention ($SECONDS s)"; cat "$out/attention.txt"
if [ "${WINDOW_S:-30}" != 0 ]; then
  timeout "${WINDOW_S:-30}" python3 -m benchmarks.kernels --ops decode_attention --window 1024 \
    --pairs f16/f16,rot4/rot4,kivi4/rot4 --contexts 32768 >"$out/attention-window.txt" 2>&1
  echo "== window ($SECONDS s)"; tail -4 "$out/attention-window.txt"
fi
