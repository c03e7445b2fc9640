#!/usr/bin/env bash
# Session 25's second device call (one H200, a fresh machine; carry .llama-pack and .whl):
#   1. the device copy rate as the worker's gauge measures it (128 MiB, best of 3) and as the
#      benchmarks do (2 GiB, median of 10) (call 1's script shadowed the stdlib's `copy`);
#   2. the expert GEMV at one token, every gate/up and down of Qwen3-30B-A3B and gpt-oss-20b:
#      moe_gemv's kernel reading each slot's expert from the routing's ids (ONE_TOKEN) at
#      several shapes, the down's one-token kernel, against the kernel reading the grouping;
#   3. Qwen3-30B-A3B tg128, gate/up reading the grouping at 4 rows x 4 warps (off) against
#      reading the ids at 2 x 2 (on, main), alternately;
#   4. Llama-3-8B through the worker, both engines, as session 24's call 6 ran it (a
#      hearth_speed run first), where llama.cpp decoded at 89.8 tok/s.
source benchmarks/gpu/call_prelude.sh o2
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
mkdir -p /tmp/run
cat >/tmp/run/copy_rates.py <<'PY'
import time

import torch

from benchmarks.hearth_speed import copy_rate
from engine.hardware.copy_rate import _gpu_copy_rate

MIB = 2**20
print(f"worker's first call (128 MiB, best of 3): {_gpu_copy_rate('cuda'):.0f} GB/s")
for i in range(3):
    print(f"  again {i}: {_gpu_copy_rate('cuda'):.0f} GB/s")
for size, reps in ((128, 20), (512, 3), (512, 20), (1024, 10)):
    print(f"{size} MiB, best of {reps}: {_gpu_copy_rate('cuda', size * MIB, reps):.0f} GB/s")
a = torch.empty(512 * MIB, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
began = time.perf_counter()
while time.perf_counter() - began < 0.2:  # 0.2 s of copies: clocks up
    b.copy_(a)
torch.cuda.synchronize()
print(f"after 0.2 s of copies, 128 MiB best of 3: {_gpu_copy_rate('cuda'):.0f} GB/s")
print(f"benchmarks (2 GiB, median of 10): {copy_rate() / 1e9:.0f} GB/s")
PY
timeout $(cap 60) python3 /tmp/run/copy_rates.py >"$o/copy.txt" 2>&1; since "copy rates (exit $?)"
cat "$o/copy.txt" >>"$o/steps.txt"
timeout $(cap 170) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-token \
  --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down,gpt-oss-20b gate+up,gpt-oss-20b down" \
  --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "moe one token (exit $?)"; grep -h "ONE-TOKEN\|failed" "$o/moe.txt" >>"$o/steps.txt"
wait $writer; since "written"
cat >/tmp/run/speed.py <<'PY'
import sys

import kernels.moe_gemv as moe_gemv
from benchmarks.hearth_speed import main

if sys.argv[1] == "off":  # gate/up reads the grouping at one token (4 rows x 4 warps)
    launch = moe_gemv._launch
    moe_gemv._launch = lambda *a, one_token=True: launch(*a, one_token=False)
raise SystemExit(main(sys.argv[2:]))
PY
for mode in off on off on; do
  [ "$(left)" -lt 150 ] && break
  timeout $(cap 100 120) python3 /tmp/run/speed.py $mode $Q --kv paged-f16 --depth 0 --tokens 128 \
    --json "$o/qwen3-$mode.json" >>"$o/qwen3-$mode.txt" 2>&1
  since "qwen3 $mode (exit $?)"; grep -h "tg128\|replays" "$o/qwen3-$mode.txt" | tail -2 >>"$o/steps.txt"
done
timeout $(cap 60) python3 -m benchmarks.hearth_speed $L --kv paged-f16 --depth 0 --tokens 128 \
  >"$o/llama8b-warm.txt" 2>&1
since "llama 8b hearth_speed (exit $?)"; grep -h "tg128" "$o/llama8b-warm.txt" >>"$o/steps.txt"
timeout $(cap 150) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $L \
  --engine both --reps 3 --depth 0 --decode 128 --no-llama-bench >"$o/llama8b-worker.txt" 2>&1
since "worker, both engines (exit $?)"; grep -h "decode 128\|load (s)\|RSS" "$o/llama8b-worker.txt" >>"$o/steps.txt"
since end
