#!/usr/bin/env bash
# Branch h34k, one nvidia-h200 call (~4 min; carry .gpu-bundle): issue 34/35, fewer launches a
# MoE decode layer (the expert down rounds h itself; route_from_router: the router's GEMV and
# the selection in one launch). The GPU tests of the changed kernels and the MoE decode paths,
# the launch count on cuda, then Qwen3-30B-A3B random Q4_K_M decode speed beside llama-bench,
# and the same with both fusions undone (benchmarks/moe_fusions_off.py: h35f's decode path) in
# the same call. Outputs under /tmp/o1, packed into $OUT/all.tgz.
set -uo pipefail
o=/tmp/o1; mkdir -p "$o" /tmp/logs /tmp/models
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
cd "$(dirname "$0")/../.."
OUT=$o source benchmarks/gpu/show_env.sh
since "llama.cpp ready"
M=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
random_model $M qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf >/tmp/logs/write.txt 2>&1 &
writer=$!
T="HEARTH_GPU_TESTS=1 timeout 70 python3 -m pytest -q -p no:cacheprovider"
env $T tests/kernels/test_moe_gemv_gpu.py >"$o/tests-gpu.txt" 2>&1
since "test_moe_gemv_gpu (exit $?)"
env $T tests/kernels/test_moe_gemv.py -k "rounds_h or router_gemv or selected_and_grouped" \
  >"$o/tests-small.txt" 2>&1
since "test_moe_gemv compiled (exit $?)"
env $T tests/engine/hearth/test_gpu.py -k "qwen3moe or gpt or ram or pinned" \
  >"$o/tests-engine.txt" 2>&1
since "test_gpu MoE (exit $?)"
timeout 60 python3 -m benchmarks.moe_launches --device cuda --model qwen3moe,gpt-oss,llama \
  >"$o/launches.txt" 2>&1
since launches
wait $writer; tail -2 /tmp/logs/write.txt >>"$o/steps.txt"; since "qwen3 file"
timeout 80 python3 -m benchmarks.hearth_speed $M --llama-bench --kv paged-f16 --depth 0 \
  --tokens 128 --json "$o/h34k.json" >"$o/h34k.txt" 2>&1
since "h34k speed"
timeout 60 python3 -m benchmarks.moe_fusions_off $M --kv paged-f16 --depth 0 --tokens 128 \
  --json "$o/fusions_off.json" >"$o/fusions_off.txt" 2>&1
since "fusions off"
tar czf "$OUT/all.tgz" -C /tmp o1
