#!/usr/bin/env bash
# Session 36's third device call (one H200; carry .llama-pack for write_random's vocabulary),
# Qwen3-30B-A3B, 2026-11-30-s29-step-ab.py's graph replays, main, 2 rounds:
#   1. kivi4/rot4 in a cache of 256 slots (call 2 ran paged f16 only there);
#   2. depth 2,048 and 8,192 in a cache of 32,768 slots against one of depth + 256, paged f16
#      and kivi4/rot4: how the cost of a large capacity at a short depth falls with depth;
#   3. the router's upper bound (2026-12-01-s36-ablate-ab.py's no-router) at 32k depth,
#      kivi4/rot4 (issue 34's 2.5x).
export DEADLINE_S=560
source benchmarks/gpu/call_prelude.sh c3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
run() {  # tag slots kv depth [variants...]
  local tag=$1 slots=$2 kv=$3 depth=$4; shift 4
  mkdir -p "$o/$tag"
  timeout $(cap 100 10) python3 ${SCRIPT:-$AB} $Q "$o/$tag" --rounds 2 --replays 2 \
    --slots $slots --kv $kv --depth $depth --variants "${@:-main}" >"$o/$tag.txt" 2>&1
  since "$tag (exit $?)"; grep -E "^(main|no-)" "$o/$tag.txt" >>"$o/steps.txt"
}
run 256-kivi4 256 kivi4/rot4 0
for d in 2048 8192; do
  for kv in paged-f16 kivi4/rot4; do
    run $((d + 256))-${kv/\//-}-d$d $((d + 256)) $kv $d
    run 32768-${kv/\//-}-d$d 32768 $kv $d
  done
done
SCRIPT=benchmarks/archive/2026-12-01-s36-ablate-ab.py run 33024-kivi4-d32768 33024 kivi4/rot4 32768 main no-router
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
