#!/usr/bin/env bash
# Run from branch split-experts (its tree at commit 3ab9a24), where the split by in-place reads was written.
# Session 27's first device call (one H200; carry .llama-pack and .whl), on branch
# split-experts: the split placement settled in steps, each only if the one before says so.
#   1. probe6 (benchmarks/archive/2026-11-30-s26-probe6.py): in-place reads of write-combined
#      against cacheable pinned memory, alone and beside ggml's host nodes;
#   2. if write-combined pages are read faster alone (< 0.97x the time) or beside ggml (<
#      0.85x): the split's and the write-combined copy's GPU tests, then experts in RAM on a
#      simulated 12 GiB card (benchmarks.moe_offload show) with splits of 2, 3 and 4 picks by
#      the CPU beside in place and llama-bench's --n-cpu-moe settings, write-combined pinned
#      experts; the same with cacheable pinned experts (in place and the splits) after it.
# Run first (call 1) with the model's writer started before probe6: its numpy work beside ggml
# made ggml alone take 18 ms a layer, so the probe ran again (call 2, CALL=o2) with the writer
# after the verdict, as this script now has it.
source benchmarks/gpu/call_prelude.sh ${CALL:-o1}
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
timeout 90 python3 benchmarks/archive/2026-11-30-s26-probe6.py "$o/probe6.json" 2>&1 \
  | grep -v repack >"$o/probe6.txt"
since "probe6 (exit $?)"; cat "$o/probe6.txt" >>"$o/steps.txt"
verdict=$(python3 - "$o/probe6.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
try:
    alone = p["write_combined alone"] / p["registered_cacheable alone"]
    beside = p["write_combined beside ggml"] / p["registered_cacheable beside ggml"]
except KeyError as missing:
    print(f"stop: no {missing}")
    raise SystemExit
go = alone < 0.97 or beside < 0.85
print(f"{'go' if go else 'stop'}: write-combined / cacheable alone {alone:.3f}, beside ggml {beside:.3f}")
PY
)
since "verdict: $verdict"
[[ $verdict == go* ]] || exit 0
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q &
writer=$!
HEARTH_GPU_TESTS=1 timeout 120 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/hearth/test_gpu.py -k "host_nodes or write_combined or pinned_copy" \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
export TRITON_CACHE_DIR=/tmp/tc
for pin in write-combined cacheable; do
  extra=(--skip-cpu); [ "$pin" = write-combined ] && extra=(--write-combined --skip-cpu)
  timeout $(cap 220 20) python3 -m benchmarks.moe_offload show --model $Q --card 12 --skip-cache \
    --split-picks 2,3,4 "${extra[@]}" --out "$o/offload-$pin" >"$o/offload-$pin.txt" 2>&1
  since "offload $pin (exit $?)"; grep -h "tok/s\|x (the" "$o/offload-$pin.txt" | cut -c1-160 >>"$o/steps.txt"
done
