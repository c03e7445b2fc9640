#!/usr/bin/env bash
# Session 34's first three device calls (one H200 each; carry .llama-pack and .whl; the second
# after the slots' routing fix, the third after the tuning went further than c + 1): a split's
# share of the picks timed at load (engine/hearth/split_tuning.py). The GPU tests of the split,
# the tuning and the published sum; host_published's benchmark (never run before); then
# Qwen3-30B-A3B on a simulated 12 GiB card, split 3 of 8 planned, three rounds in turn: the
# decode graph tuning the share (with llama-bench --n-cpu-moe 18, 20) and the planned share
# kept (--untuned-split).
export DEADLINE_S=545
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 120 10) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_host_published.py \
  tests/engine/hearth/test_gpu.py -k "published or split or ram" >$o/tests.txt 2>&1
since "tests (exit $?)"; tail -3 $o/tests.txt >>$o/steps.txt
timeout $(cap 40 10) python3 -m benchmarks.kernels.host_published >$o/host_published.txt 2>&1
since "host_published (exit $?)"; cat $o/host_published.txt >>$o/steps.txt
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
for r in 1 2 3; do
  timeout $(cap 110 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 \
    --out "$o/tuned-$r" >"$o/tuned-$r.txt" 2>&1
  since "round $r tuned (exit $?)"; grep -h "Hearth engine\|llama-bench tg" "$o/tuned-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
  timeout $(cap 70 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe '' --untuned-split \
    --out "$o/untuned-$r" >"$o/untuned-$r.txt" 2>&1
  since "round $r untuned (exit $?)"; grep -h "Hearth engine" "$o/untuned-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-600 >>"$o/steps.txt"
done
since end
