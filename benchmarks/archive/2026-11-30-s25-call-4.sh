#!/usr/bin/env bash
# Session 25's fourth device call (one H200, a fresh machine; carry .llama-pack and .whl):
#   1. the expert GEMV's GPU tests (the kernels': call 3's step ran out of time);
#   2. the worker's copy rate (engine/hardware/copy_rate.py, now 8 copies of 128 MiB a timing)
#      beside the benchmarks' (2 GiB, median of 10);
#   3. the downs at one token reading h in 8 bits (quantized before the timed calls) against
#      rounding it themselves: what a down costs when the gate/up before it writes h in 8 bits;
#   4. Qwen3-30B-A3B's decode step profile on main (eager, one step's kernels);
#   5. experts in RAM on a simulated 12 GiB card: the Hearth engine in place beside
#      llama-bench's --n-cpu-moe settings (benchmarks.moe_offload show --skip-cache).
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 110 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 100 -rfE \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_one_token.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -14 >>"$o/steps.txt"
mkdir -p /tmp/run
cat >/tmp/run/copy_rates.py <<'PY'
from benchmarks.hearth_speed import copy_rate
from engine.hardware.copy_rate import _gpu_copy_rate

for i in range(4):
    print(f"worker's gauge (8 copies of 128 MiB a timing, best of 3), call {i}: "
          f"{_gpu_copy_rate('cuda'):.0f} GB/s")
print(f"one copy a timing (before): {_gpu_copy_rate('cuda', copies=1):.0f} GB/s")
print(f"benchmarks (2 GiB, median of 10): {copy_rate() / 1e9:.0f} GB/s")
PY
timeout $(cap 60) python3 /tmp/run/copy_rates.py >"$o/copy.txt" 2>&1; since "copy rates (exit $?)"
cat "$o/copy.txt" >>"$o/steps.txt"
timeout $(cap 120) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-token \
  --cases "qwen3-30b-a3b down,gpt-oss-20b down" --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "moe downs (exit $?)"; grep -h "ONE-TOKEN\|failed" "$o/moe.txt" >>"$o/steps.txt"
wait $writer; since written
timeout $(cap 80) python3 -m benchmarks.hearth_speed $Q --kv paged-f16 --depth 0 --tokens 128 \
  --profile --json "$o/qwen3-profile.json" >"$o/qwen3-profile.txt" 2>&1
since "qwen3 profile (exit $?)"; grep -h "tg128\|replays" "$o/qwen3-profile.txt" >>"$o/steps.txt"
timeout $(cap 200) python3 -m benchmarks.moe_offload show --model $Q --card 12 --out "$o/offload" \
  --skip-cache >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "tok/s\|x (the" "$o/offload.txt" | cut -c1-300 >>"$o/steps.txt"
since end
