#!/usr/bin/env bash
# Session 25's first device call (one H200, a fresh machine; carry .llama-pack and .whl):
#   1. llama.cpp decoding Llama-3-8B through a fresh worker (`hearth bench --engine llama`):
#      main (the Hearth warm-up paused while a llama.cpp model is loaded), then the warm-up
#      left running beside it (a sitecustomize that makes the pause do nothing: the old
#      behaviour), then main again; llama-bench's tg128 of the same file and build beside;
#   2. the device copy rate as the worker's gauge measures it (128 MiB, best of 3) and as the
#      benchmarks do (2 GiB, median of 10), and what makes them differ;
#   3. the expert gate/up at one token: slots' experts read from the routing's ids (ONE_TOKEN)
#      at several shapes against the grouping read (benchmarks.kernels.moe --one-token);
#   4. Qwen3-30B-A3B tg128 with gate/up's one-token reading off and on, alternately.
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L; since "8b written"
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
python3 -c "import sitecustomize; print('existing sitecustomize:', sitecustomize.__file__)" \
  >>"$o/steps.txt" 2>&1
mkdir -p /tmp/old
cat >/tmp/old/sitecustomize.py <<'PY'
import engine.runtime.hearth_prewarm as prewarm

prewarm.pause = lambda: None  # the warm-up goes on beside a llama.cpp model (before the fix)
PY
bench_llama() {  # NAME [PYTHONPATH prefix]
  PYTHONPATH="${2:-}$PYTHONPATH" timeout $(cap 90) python3 -c \
    "import sys; from engine.cli import main; sys.exit(main())" bench $L --engine llama \
    --reps 3 --depth 0 --decode 128 --no-llama-bench >"$o/worker-$1.txt" 2>&1
  since "worker llama.cpp $1 (exit $?)"; grep -h "decode 128\|load (s)" "$o/worker-$1.txt" >>"$o/steps.txt"
}
bench_llama main-a
bench_llama old /tmp/old:
bench_llama main-b
timeout $(cap 60) llama-bench -m $L -p 0 -n 128 -r 3 -ngl 99 -fa 1 >"$o/llama-bench-8b.txt" 2>&1
since "llama-bench 8b (exit $?)"; grep -h "tg128" "$o/llama-bench-8b.txt" >>"$o/steps.txt"
cat >/tmp/copy.py <<'PY'
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
timeout $(cap 60) python3 /tmp/copy.py >"$o/copy.txt" 2>&1; since "copy rates (exit $?)"
cat "$o/copy.txt" >>"$o/steps.txt"
timeout $(cap 150) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-token \
  --cases "qwen3-30b-a3b gate+up,gpt-oss-20b gate+up" --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "moe one token (exit $?)"; grep -h "ONE-TOKEN\|failed" "$o/moe.txt" >>"$o/steps.txt"
wait $writer; since "qwen3 written"
cat >/tmp/speed.py <<'PY'
import sys

import kernels.moe_gemv as moe_gemv
from benchmarks.hearth_speed import main

if sys.argv[1] == "off":  # gate/up reads the grouping at one token, as before
    launch = moe_gemv._launch
    moe_gemv._launch = lambda *a, one_token=True: launch(*a, one_token=False)
raise SystemExit(main(sys.argv[2:]))
PY
for mode in off on off on; do
  [ "$(left)" -lt 60 ] && break
  timeout $(cap 110) python3 /tmp/speed.py $mode $Q --kv paged-f16 --depth 0 --tokens 128 \
    --json "$o/qwen3-$mode.json" >>"$o/qwen3-$mode.txt" 2>&1
  since "qwen3 $mode (exit $?)"; grep -h "tg128\|replays" "$o/qwen3-$mode.txt" | tail -2 >>"$o/steps.txt"
done
since end
