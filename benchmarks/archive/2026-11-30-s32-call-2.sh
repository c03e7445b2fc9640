#!/usr/bin/env bash
# Session 32's second device call (one H200; carry .llama-pack and .whl).
# 1. Experts in RAM (issue 34's 1.2x): the copier and the stepping thread each waiting for the
#    GPU's piece (main) against the stepping thread waiting and handing the copies over
#    (main with 2026-11-30-s32-copier-waits-beside.patch reversed, in /tmp/old), alternately
#    over three rounds, `benchmarks.moe_offload show` on a simulated 12 GiB card, split 3 of
#    8; llama-bench --n-cpu-moe 18 and 20 in each round of main's.
# 2. The split's GPU tests and the one-token down's (its two chunks) on main.
# 3. Qwen3-30B-A3B beside llama-bench (`benchmarks.hearth_speed --llama-bench`), main with the
#    one-token down in two chunks.
export DEADLINE_S=575
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
(cd /tmp/old && (patch -R -p1 -s <$A/2026-11-30-s32-copier-waits-beside.patch || git apply -R $A/2026-11-30-s32-copier-waits-beside.patch)) || since "old: patch failed"
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
for r in 1 2 3; do
  timeout $(cap 110 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 \
    --out "$o/new-$r" >"$o/new-$r.txt" 2>&1
  since "round $r main (exit $?)"; grep -h "Hearth engine\|llama-bench tg" "$o/new-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-400 >>"$o/steps.txt"
  timeout $(cap 70 10) bash -c "cd /tmp/old && PYTHONPATH=/tmp/old:\$PYTHONPATH python3 -m benchmarks.moe_offload show $OFF --ncmoe '' --out $o/old-$r" >"$o/old-$r.txt" 2>&1
  since "round $r old (exit $?)"; grep -h "Hearth engine" "$o/old-$r.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-400 >>"$o/steps.txt"
done
HEARTH_GPU_TESTS=1 timeout $(cap 120 10) python3 -m pytest -n 4 -q -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu.py tests/kernels/test_moe_one_token.py -k "split or cpu_run_as_host or one_token" >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -5 >>"$o/steps.txt"
timeout $(cap 150 5) python3 -m benchmarks.hearth_speed $Q --llama-bench --tokens 128 \
  --kv kivi4/rot4 --json "$o/qwen3.json" >"$o/qwen3.txt" 2>&1
since "qwen3 (exit $?)"; grep -h "pp512\|tg128\|depth\|bound" "$o/qwen3.txt" | head -8 >>"$o/steps.txt"
since end
