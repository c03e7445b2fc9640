#!/usr/bin/env bash
# Session 27's sixth device call (one H200; carry .llama-pack and .whl): the split again after
# its layers took the FFN norm's fused router launch, with its pauses timed in parts
# (benchmarks.moe_offload show, 12 GiB card: read in place, splits of 3 and 2 picks by the
# CPU, llama-bench's --n-cpu-moe settings); then the split of 3 with libgomp's threads
# spinning between calls (OMP_WAIT_POLICY=ACTIVE; moe_offload's hearth mode, no card hog).
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 300 10) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
  --skip-cpu --split-picks 3,2 --out "$o/offload" >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "tok/s\|x (the" "$o/offload.txt" | cut -c1-200 >>"$o/steps.txt"
for policy in ACTIVE PASSIVE; do
  OMP_WAIT_POLICY=$policy timeout $(cap 100 5) python3 -m benchmarks.moe_offload hearth \
    --model $Q --ram-layers 21 --cpu-picks 3 --ctx 1024 >"$o/hearth-omp-$policy.json" 2>&1
  since "hearth c=3 OMP_WAIT_POLICY=$policy (exit $?)"
  python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print({k: round(v, 1) if isinstance(v, float) else v for k, v in r.items() if k.startswith(('tg128', 'split_'))})" "$o/hearth-omp-$policy.json" >>"$o/steps.txt" 2>&1
done
