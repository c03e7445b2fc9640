#!/usr/bin/env bash
# Session 32's fifth device call (one H200; carry .llama-pack and .whl): experts in RAM,
# Qwen3-30B-A3B on a simulated 12 GiB card, split 3 of 8, three rounds in turn: main (ggml's
# repacked experts collapsed onto huge pages after the repack, MADV_COLLAPSE), main without
# that (2026-11-30-s32-collapse.patch reversed, in /tmp/old), llama-bench --n-cpu-moe 18 and
# 20. Each Hearth run reports the process's AnonHugePages.
export DEADLINE_S=420
source benchmarks/gpu/call_prelude.sh c5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
uname -r >>"$o/steps.txt"
export TRITON_CACHE_DIR=/tmp/tc
A=$PWD/benchmarks/archive
mkdir -p /tmp/old && tar cf - --exclude=./.llama-pack --exclude=./.whl . | tar xf - -C /tmp/old
(cd /tmp/old && (patch -R -p1 -s <$A/2026-11-30-s32-collapse.patch || git apply -R $A/2026-11-30-s32-collapse.patch)) || since "old: patch failed"
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
for r in 1 2 3; do
  timeout $(cap 110 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 \
    --out "$o/new-$r" >"$o/new-$r.txt" 2>&1
  since "round $r main (exit $?)"; grep -h "Hearth engine\|llama-bench tg" "$o/new-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-420 >>"$o/steps.txt"
  timeout $(cap 70 10) bash -c "cd /tmp/old && PYTHONPATH=/tmp/old:\$PYTHONPATH python3 -m benchmarks.moe_offload show $OFF --ncmoe '' --out $o/old-$r" >"$o/old-$r.txt" 2>&1
  since "round $r no collapse (exit $?)"; grep -h "Hearth engine" "$o/old-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-420 >>"$o/steps.txt"
done
since end
