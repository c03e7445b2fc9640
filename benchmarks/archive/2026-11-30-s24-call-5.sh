#!/usr/bin/env bash
# Session 24's fifth device call (one H200, a fresh machine; carry .llama-pack and .whl), main:
#   1. the fused write's GPU test once more (its kernel now reads the position from the device
#      alone);
#   2. norm_and_route's tiles swept at Qwen3-30B-A3B's router, a decode step's launch
#      (benchmarks.kernels.router --sweep): the router is 6.3 us of each layer's 42;
#   3. Qwen3-30B-A3B decode with the sweep's fastest tile against the default (kernels.moe_router
#      .DEFAULT_ROUTER replaced in the benchmark's process), alternately, twice each.
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout 60 python3 -m pytest -n 4 -q -p no:cacheprovider --timeout 50 -rfE \
  tests/kernels/test_kv_write_in_attention.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -5 >>"$o/steps.txt"
timeout $(cap 90) python3 -m benchmarks.kernels.router --sweep >"$o/router.txt" 2>&1
since "router sweep (exit $?)"; grep -h "us a layer" "$o/router.txt" | cut -c1-110 >>"$o/steps.txt"
best=$(python3 - "$o/router.txt" <<'PY'
import re, sys
rows = [(float(m.group(4)), m.group(1), m.group(2), m.group(3)) for m in
        (re.search(r"(\d+) rows x (\d+) columns a program, (\d+) warps: +([\d.]+) us", l)
         for l in open(sys.argv[1])) if m]
print(",".join(min(rows)[1:]) if rows else "4,512,4")
PY
)
echo "fastest tile: $best" >>"$o/steps.txt"
cat >/tmp/router_speed.py <<'PY'
import sys

import kernels.moe_router as router
from benchmarks.hearth_speed import main

block_e, split, warps = (int(v) for v in sys.argv[1].split(","))
router.DEFAULT_ROUTER = router.RouterConfig(block_e=block_e, split=split, num_warps=warps)
raise SystemExit(main(sys.argv[2:]))
PY
wait $writer; since written
for run in a b; do
  for tile in 4,512,4 $best; do
    timeout $(cap 75) python3 /tmp/router_speed.py $tile $Q --kv paged-f16 --depth 0 --tokens 128 \
      --profile --json "$o/qwen3-$tile-$run.json" >"$o/qwen3-$tile-$run.txt" 2>&1
    since "qwen3 router tile $tile run $run (exit $?)"
    grep -h "tg128\|replays\|_router_kernel" "$o/qwen3-$tile-$run.txt" >>"$o/steps.txt"
  done
done
since end
