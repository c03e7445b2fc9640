#!/usr/bin/env bash
# Session 33's second device call (one H200; carry .llama-pack and .whl): experts in RAM with
# the next piece launched by the copier after its copies and ggml's sum added on the device
# once published (2026-11-30-s33-next-piece-early.patch). The GPU tests of the split and the
# new kernel; a trace of the new split's steps; then Qwen3-30B-A3B on a simulated 12 GiB card,
# split 3 of 8, two rounds in turn: this tree (with llama-bench --n-cpu-moe 18, 20) and the tree
# before (the patch reversed, in /tmp/old).
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c2
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
A=$PWD/benchmarks/archive
mkdir -p /tmp/old && tar cf - --exclude=./.llama-pack --exclude=./.whl . | tar xf - -C /tmp/old
(cd /tmp/old && (patch -R -p1 -s <$A/2026-11-30-s33-next-piece-early.patch || git apply -R $A/2026-11-30-s33-next-piece-early.patch)) || since "old: patch failed"
timeout $(cap 150 10) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_host_published.py \
  tests/kernels/test_expert_unpack.py tests/engine/hearth/test_gpu.py -k "published or unpack or split or ram" \
  >$o/tests.txt 2>&1
since "tests (exit $?)"; tail -3 $o/tests.txt >>$o/steps.txt
mkdir -p $o/trace
timeout $(cap 90 10) python3 $A/2026-11-30-s33-trace-split.py $Q $o/trace --cpu-picks 3 >$o/trace.txt 2>&1
since "trace (exit $?)"; gzip -f $o/trace/split.trace.json
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
for r in 1 2; do
  timeout $(cap 110 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 \
    --out "$o/new-$r" >"$o/new-$r.txt" 2>&1
  since "round $r new (exit $?)"; grep -h "Hearth engine\|llama-bench tg" "$o/new-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-600 >>"$o/steps.txt"
  timeout $(cap 70 10) bash -c "cd /tmp/old && PYTHONPATH=/tmp/old:\$PYTHONPATH python3 -m benchmarks.moe_offload show $OFF --ncmoe '' --out $o/old-$r" >"$o/old-$r.txt" 2>&1
  since "round $r old (exit $?)"; grep -h "Hearth engine" "$o/old-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-420 >>"$o/steps.txt"
done
since end
