#!/usr/bin/env bash
# Session 39's fourth device call (one H200; carry .llama-pack, .whl and the kernels/ copies
# .s39-before and .s39-join): rot4 V rotated back in the split program after its rows are
# stored, read back whole (reload: the tree itself; the loop and its registers as before),
# against join (call 3) and the kernels before; the attention probe at depths 64 and 32768,
# both shapes, with the reduce launched after the split (overlap=0: were the waiting reduce
# programs beside the split's slowing it?), the new reduce at 2 warps, before also with the
# reduce merging 132 splits in one step (chunk256); the
# engine's step at 32k depth for Qwen3-30B-A3B and Llama-3-8B, each tree in its own process.
export DEADLINE_S=570
source benchmarks/gpu/call_prelude.sh c4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
P=benchmarks/archive/2026-12-01-s39-attention-depth.py
TREES="before:.s39-before join:.s39-join reload:"
run_tree() {  # NAME DIR COMMAND...: the command with DIR's kernels/ first on the path
  local name=$1 dir=$2; shift 2
  local path=$PYTHONPATH
  [ -n "$dir" ] && path=$PWD/$dir:$PYTHONPATH
  PYTHONPATH=$path TRITON_CACHE_DIR=/tmp/tc-$name "$@"
}
for h in 4 8; do
  for t in $TREES; do
    name=${t%%:*}
    variants="main reduce_warps=2 overlap=0"; [ $name = before ] && variants="main chunk256 overlap=0"
    run_tree $name "${t#*:}" timeout $(cap 40 300) python3 $P --kv-heads $h --depths 64 32768 \
      --variants $variants >"$o/probe-$h-$name.txt" 2>&1
    since "probe $h $name (exit $?)"; grep depth "$o/probe-$h-$name.txt" | sed "s/^/$name /" >>"$o/steps.txt"
  done
done
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q llama:$L; do
  for t in before:.s39-before join:.s39-join reload:; do
    name=${t%%:*}; tag=${m%%:*}-32k-$name
    mkdir -p "$o/$tag"
    run_tree $name "${t#*:}" timeout $(cap 45 5) python3 $AB ${m#*:} "$o/$tag" --rounds 1 \
      --replays 2 --kv kivi4/rot4 --slots 32832 --depth 32768 --variants main >"$o/$tag.txt" 2>&1
    since "step $tag (exit $?)"; tail -1 "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
  done
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
