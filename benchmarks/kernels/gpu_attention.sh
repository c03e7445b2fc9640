#!/usr/bin/env bash
# The KV cache's part of the kernels' Show run, kernels only (no llama.cpp), in about 3 minutes
# on an H100: the KV cache's tests at full size on the GPU (positions, sliding window, CUDA
# graph replay, every format pair), then decode attention at 4k / 32k / 128k for each K/V
# format beside our f16 in the same run (python -m benchmarks.kernels --no-gemv), and a
# sliding-window figure. SWEEP=32768 adds the launch-shape sweep at that depth (SWEEP_PAIRS:
# its K/V pairs). FLAGS="rotate_q_once sum_after_loop" (AttentionTuning flags not yet
# default): their GPU tests first (FLAG_TESTS, a pytest -k expression), then the table with each
# flag on between timings of the default, and attention_flags.py's verdict per flag and K/V
# pair (make it default or keep it off). FLAGS="fused_reduce flat_v q_prepared" (session 8):
# the reduce in the split kernel's launch, rot4 V's tile built 2-D, and q prepared as the RoPE
# kernel leaves it (rotated K); their tests: FLAG_TESTS="fused or prepar or flat"
# (test_kv_one_launch.py, test_rope.py, the CUDA-graph replays with the fused reduce).
# TEST_S=0 / WINDOW_S=0 skip the general KV tests / the sliding-window figure. PPSM_PAIRS with
# PPSM=N: the table again for those pairs at N programs an SM (--programs-per-sm), the flags
# timed beside that default (PPSM_CONTEXTS, PPSM_S).
# gpu_show.sh runs this with PART=attention, beside llama-bench's figures. Results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 HEARTH_GPU_TESTS=1 PYTHONPATH="${PYTHONPATH:-}:$PWD"
SECONDS=0
flag_args=()
for flag in ${FLAGS:-}; do flag_args+=(--flag "$flag"); done
if [ -n "${FLAGS:-}" ]; then
  timeout "${FLAG_TEST_S:-150}" python3 -m pytest tests/kernels/test_kv_cache_positions.py \
    tests/kernels/test_kv_one_launch.py tests/kernels/test_rope.py tests/kernels/test_kv_cache.py \
    -k "${FLAG_TESTS:-q_rotated_once or sum_after_loop or captured}" \
    -v -p no:cacheprovider >"$out/attention-flag-tests.log" 2>&1
  echo "== flag tests ($SECONDS s): $(grep -c PASSED "$out/attention-flag-tests.log") passed"
  grep -E "FAILED|ERROR|passed|failed" "$out/attention-flag-tests.log" | tail -15
fi
if [ "${TEST_S:-100}" != 0 ]; then
  timeout "${TEST_S:-100}" python3 -m pytest tests/kernels/test_kv_kivi.py tests/kernels/test_kv_cache.py \
    tests/kernels/test_kv_cache_positions.py ${ENGINE_TESTS:-} -v -p no:cacheprovider \
    >"$out/attention-tests.log" 2>&1
  echo "== tests ($SECONDS s): $(grep -c PASSED "$out/attention-tests.log") passed"
  grep -E "FAILED|ERROR|passed|failed" "$out/attention-tests.log" | tail -15
fi
if [ -n "${SWEEP:-}" ]; then
  timeout "${SWEEP_S:-90}" python3 -m benchmarks.kernels --no-gemv --no-write \
    --pairs "${SWEEP_PAIRS:-f16/f16,rot4/rot4,q8/rot4,kivi4/rot4}" --contexts 4096 --attention-sweep "$SWEEP" \
    --json "$out/attention-sweep.json" >"$out/attention-sweep.txt" 2>&1
  echo "== sweep ($SECONDS s)"; sed -n '/Launch shapes/,$p' "$out/attention-sweep.txt"
fi
timeout "${BENCH_S:-100}" python3 -m benchmarks.kernels --no-gemv \
  --pairs "${PAIRS:-f16/f16,q8/q8,rot4/rot4,q8/rot4,rot2/rot4,kivi4/rot4}" \
  ${flag_args[@]+"${flag_args[@]}"} ${BENCH_ARGS:-} --json "$out/attention.json" >"$out/attention.txt" 2>&1
echo "== attention ($SECONDS s)"; cat "$out/attention.txt"
if [ -n "${FLAGS:-}" ]; then
  python3 -m benchmarks.kernels.attention_flags "$out/attention.json" "${flag_args[@]}" \
    | tee "$out/attention-flag-verdict.txt"
fi
if [ -n "${PPSM:-}" ]; then
  timeout "${PPSM_S:-60}" python3 -m benchmarks.kernels --no-gemv --no-write \
    --pairs "${PPSM_PAIRS:-rot4/rot4}" --contexts "${PPSM_CONTEXTS:-32768,131072}" \
    --programs-per-sm "$PPSM" ${flag_args[@]+"${flag_args[@]}"} \
    --json "$out/attention-ppsm.json" >"$out/attention-ppsm.txt" 2>&1
  echo "== $PPSM programs an SM ($SECONDS s)"; sed -n '/Decode attention/,$p' "$out/attention-ppsm.txt"
  if [ -n "${FLAGS:-}" ]; then
    python3 -m benchmarks.kernels.attention_flags "$out/attention-ppsm.json" "${flag_args[@]}" \
      | tee "$out/attention-ppsm-verdict.txt"
  fi
fi
if [ "${WINDOW_S:-30}" != 0 ]; then
  timeout "${WINDOW_S:-30}" python3 -m benchmarks.kernels --no-gemv --no-write --window 1024 \
    --pairs f16/f16,rot4/rot4,kivi4/rot4 --contexts 32768 >"$out/attention-window.txt" 2>&1
  echo "== window ($SECONDS s)"; tail -3 "$out/attention-window.txt"
fi
