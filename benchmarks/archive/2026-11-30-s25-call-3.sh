#!/usr/bin/env bash
# Session 25's third device call (one H200, a fresh machine; carry .llama-pack and .whl): main
# with a one-token step's expert GEMV reading each slot's expert from the routing's ids
# (moe_gemv's ONE_TOKEN; the down's default there 8 rows x 2 warps):
#   1. the GPU tests of the expert GEMV and the engine's MoE;
#   2. ncu at one token, Qwen3-30B-A3B's shapes: gate/up from the ids (4 x 4), the down's
#      one-token kernel (16 x 8) and the down from the ids (8 x 2): throughput, issue, stalls;
#   3. Qwen3-30B-A3B tg128, the grouping read at one token (off: as before this session)
#      against main (on), alternately, then main beside llama-bench;
#   4. gpt-oss-20b the same way;
#   5. Qwen3's experts of 21 layers read in place on a 12 GiB card (main).
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf $G ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 120 python3 -m pytest -n 8 -q -p no:cacheprovider --timeout 110 -rfE \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_one_token.py \
  tests/engine/hearth/test_moe.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -14 >>"$o/steps.txt"
mkdir -p /tmp/run
cat >/tmp/run/ncu_moe.py <<'PY'
"""Qwen3-30B-A3B's expert launches at one token, eagerly, 4 times each, for ncu."""
import torch

from benchmarks.kernels.moe import CASES, _copies, _routings
from kernels.act_quant import quantize_activation
from kernels.moe_gemv import MoeGemvConfig, expert_down, expert_gate_up
from kernels.moe_routing import route_experts

gate_up, down = CASES[0], CASES[1]
routing = route_experts(torch.from_numpy(_routings(gate_up, 1, 1)[0]).cuda(),
                        torch.rand(1, 8, device="cuda"), 128)
x = torch.randn(1, 2048, dtype=torch.float16, device="cuda") * 0.1
xq = quantize_activation(x)
g, u = _copies(gate_up)[0]
d = _copies(down)[0][0]
h = torch.randn(1, 8, 768, dtype=torch.float16, device="cuda") * 0.1
for _ in range(4):
    expert_gate_up(x, g, u, routing, quantized=xq)
for _ in range(4):
    expert_down(h, d, routing)  # the one-token kernel
for _ in range(4):
    expert_down(h, d, routing, slots_kernel=False)  # moe_gemv's, from the ids, 8 x 2
torch.cuda.synchronize()
PY
if command -v ncu >/dev/null; then
  timeout $(cap 90) ncu -k regex:"_expert_kernel|_one_token_down" --launch-skip 2 --launch-count 9 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    python3 /tmp/run/ncu_moe.py >"$o/ncu.txt" 2>&1
  since "ncu (exit $?)"
else
  since "no ncu"
fi
wait $writer; since written
cat >/tmp/run/speed.py <<'PY'
import sys

import kernels.moe_gemv as moe_gemv
from benchmarks.hearth_speed import main

if sys.argv[1] == "off":  # a one-token step reads the grouping (its shapes as before)
    launch = moe_gemv._launch

    def grouped(*args, **kwargs):
        args = args[:8]
        return launch(*args, one_token=False)

    moe_gemv._launch = grouped
raise SystemExit(main(sys.argv[2:]))
PY
ab() {  # NAME FILE
  for mode in off on off on; do
    [ "$(left)" -lt 200 ] && break
    timeout $(cap 70 150) python3 /tmp/run/speed.py $mode $2 --kv paged-f16 --depth 0 --tokens 128 \
      --json "$o/$1-$mode.json" >>"$o/$1-$mode.txt" 2>&1
    since "$1 $mode (exit $?)"; grep -h "tg128\|replays" "$o/$1-$mode.txt" | tail -2 >>"$o/steps.txt"
  done
}
ab qwen3 $Q
timeout $(cap 100 60) python3 -m benchmarks.hearth_speed $Q --llama-bench --kv paged-f16 kivi4/rot4 \
  --tokens 128 --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 beside llama-bench (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/qwen3.txt" >>"$o/steps.txt"
ab gpt-oss $G
timeout $(cap 60 40) python3 -m benchmarks.hearth_speed $G --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --json "$o/gpt-oss.json" >"$o/gpt-oss.txt" 2>&1
since "gpt-oss beside llama-bench (exit $?)"; grep -h "pp512\|tg128" "$o/gpt-oss.txt" >>"$o/steps.txt"
timeout $(cap 90) python3 -m benchmarks.moe_offload hearth --model $Q --card 12 --ram-layers 21 \
  --slots 0 >"$o/in-place.json" 2>"$o/in-place.err"
since "in place (exit $?)"; cut -c1-400 "$o/in-place.json" >>"$o/steps.txt"
since end
