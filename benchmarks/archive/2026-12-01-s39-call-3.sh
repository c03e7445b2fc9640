#!/usr/bin/env bash
# Session 39's third device call (one H200; carry .llama-pack, .whl and the kernels/ copies
# .s39-before, .s39-join, .s39-halves): rot4 V rotated back in each split program in two
# forms (join: the halves joined into one tile first; halves: H_D from two H_{D/2} of the
# halves' sum and difference), and with the program's pages brought into L2 before its wait
# (now: the tree itself), against the kernels before; the attention probe at depths 64 and
# 32768, both shapes; the engine's step at 32k depth for
# Qwen3-30B-A3B and Llama-3-8B, each tree in its own process, one after the other; the
# attention's GPU tests in what time is left.
export DEADLINE_S=570
source benchmarks/gpu/call_prelude.sh c3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
P=benchmarks/archive/2026-12-01-s39-attention-depth.py
TREES="before:.s39-before join:.s39-join halves:.s39-halves now:"
run_tree() {  # NAME DIR COMMAND...: the command with DIR's kernels/ first on the path
  local name=$1 dir=$2; shift 2
  local path=$PYTHONPATH
  [ -n "$dir" ] && path=$PWD/$dir:$PYTHONPATH
  PYTHONPATH=$path TRITON_CACHE_DIR=/tmp/tc-$name "$@"
}
for h in 4 8; do
  for t in $TREES; do
    name=${t%%:*}
    run_tree $name "${t#*:}" timeout $(cap 40 330) python3 $P --kv-heads $h --depths 64 32768 \
      --variants main >"$o/probe-$h-$name.txt" 2>&1
    since "probe $h $name (exit $?)"; grep depth "$o/probe-$h-$name.txt" | sed "s/^/$name /" >>"$o/steps.txt"
  done
done
wait $writer; since written
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q llama:$L; do
  for t in before:.s39-before halves:.s39-halves now:; do
    name=${t%%:*}; tag=${m%%:*}-32k-$name
    mkdir -p "$o/$tag"
    run_tree $name "${t#*:}" timeout $(cap 45 5) python3 $AB ${m#*:} "$o/$tag" --rounds 1 \
      --replays 2 --kv kivi4/rot4 --slots 32832 --depth 32768 --variants main >"$o/$tag.txt" 2>&1
    since "step $tag (exit $?)"; tail -1 "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
  done
done
TRITON_CACHE_DIR=/tmp/tc-now timeout $(cap 250 10) python3 -m pytest -q -p no:cacheprovider -x \
  tests/kernels/test_kv_page_step.py tests/kernels/test_kv_cache.py tests/kernels/test_kv_kivi.py \
  tests/kernels/test_grouped_attention.py tests/kernels/test_kv_cache_positions.py \
  tests/kernels/test_kv_write_in_attention.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
