#!/usr/bin/env bash
# Session 34's fourth device call (one H200; carry .llama-pack and .whl): a split's x, ids and
# weights written to pinned memory by one kernel (kernels/step_to_host.py). The GPU tests of
# the new kernel, the published sum and the split; the kernel's benchmark; the A/B in one
# process against the three copies and the host's conversion (2026-11-30-s34-publish-ab.py,
# split 4 of 8, no tuning); then Qwen3-30B-A3B on a simulated 12 GiB card with the share tuned
# (split 3 planned), two rounds beside llama-bench --n-cpu-moe 18, 20.
export DEADLINE_S=545
source benchmarks/gpu/call_prelude.sh c4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 120 10) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_step_to_host.py \
  tests/kernels/test_host_published.py tests/engine/hearth/test_gpu.py -k "host or published or split or ram" \
  >$o/tests.txt 2>&1
since "tests (exit $?)"; tail -3 $o/tests.txt >>$o/steps.txt
timeout $(cap 40 10) python3 -m benchmarks.kernels.step_to_host >$o/step_to_host.txt 2>&1
since "step_to_host (exit $?)"; cat $o/step_to_host.txt >>$o/steps.txt
timeout $(cap 120 10) python3 benchmarks/archive/2026-11-30-s34-publish-ab.py $Q --cpu-picks 4 >$o/publish-ab.txt 2>&1
since "publish A/B (exit $?)"; tail -4 $o/publish-ab.txt >>$o/steps.txt
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
for r in 1 2; do
  timeout $(cap 110 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 \
    --out "$o/tuned-$r" >"$o/tuned-$r.txt" 2>&1
  since "round $r tuned (exit $?)"; grep -h "Hearth engine\|llama-bench tg" "$o/tuned-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
done
since end
