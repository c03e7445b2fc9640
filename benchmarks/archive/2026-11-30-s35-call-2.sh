#!/usr/bin/env bash
# Session 35's second device call (one H200; carry .llama-pack and .whl): experts in RAM with
# ggml's graph in three nodes (gate and up merged, numpy's weighted sum) against the tree
# before (2026-11-30-s35-three-nodes.patch reversed, in a copy), in turn: new, old, new, old,
# new; llama-bench -ncmoe 18, 20 beside each new run.
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c2
install_wheels
llama_from_pack
since unpacked
mkdir -p /tmp/old && tar cf - --exclude=./.llama-pack --exclude=./.whl . | tar xf - -C /tmp/old
(cd /tmp/old && patch -s -R -p1 <benchmarks/archive/2026-11-30-s35-three-nodes.patch) \
  >>"$o/steps.txt" 2>&1; since "old tree (exit $?)"
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
run() {  # NAME TREE NCMOE
  (cd "$2" && timeout $(cap 110 5) python3 -m benchmarks.moe_offload show $OFF --ncmoe "$3" \
    --out "$o/$1" >"$o/$1.txt" 2>&1)
  since "$1 (exit $?)"
  grep -h "Hearth engine\|llama-bench tg" "$o/$1.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-700 >>"$o/steps.txt"
}
run new-1 "$PWD" 18,20
run old-1 /tmp/old ""
run new-2 "$PWD" 18,20
run old-2 /tmp/old ""
run new-3 "$PWD" 18,20
since end
