#!/usr/bin/env bash
# Session 23's fifth device call (one H200, a fresh machine; carry .llama-pack and .whl). Call 4
# measured experts in RAM read in place at 63.8 tok/s (32.8 GB/s over the bus; session 19's
# machine 68.0 at 35.0 GB/s, before the one-token down): is the one-token down (128 programs of
# 80 KB, reading pinned host memory in place) slower over the bus than the grouped kernel? The
# same placement (21 layers' experts in RAM, read in place, a simulated 12 GiB card), main
# against main with moe_gemv._one_token patched off in the process, alternately, twice each.
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
args="hearth --model $Q --card 12 --ram-layers 21 --slots 0"
for run in a b; do
  timeout $(cap 60) python3 -m benchmarks.moe_offload $args >"$o/one-token-$run.json" 2>"$o/one-token-$run.err"
  since "in place, one-token down, run $run (exit $?)"; cut -c1-400 "$o/one-token-$run.json" >>"$o/steps.txt"
  timeout $(cap 60) python3 -c "
import sys
import kernels.moe_gemv as m
m._one_token = lambda *a, **k: False  # the grouped kernel at one token too
from benchmarks.moe_offload import main
sys.exit(main(sys.argv[1:]))" $args >"$o/grouped-$run.json" 2>"$o/grouped-$run.err"
  since "in place, grouped down, run $run (exit $?)"; cut -c1-400 "$o/grouped-$run.json" >>"$o/steps.txt"
done
since end
