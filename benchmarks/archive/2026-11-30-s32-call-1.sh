#!/usr/bin/env bash
# Session 32's first device call (one H200; carry .llama-pack and .whl).
# 1. Experts in RAM (issue 34's 1.2x): the copier thread waiting for the GPU's piece itself
#    (main) against the stepping thread waiting and handing the copies over (main with
#    2026-11-30-s32-copier-waits.patch reversed, in /tmp/old), alternately over three rounds,
#    `benchmarks.moe_offload show` on a simulated 12 GiB card, split 3 of 8; llama-bench
#    --n-cpu-moe 18 and 20 (session 31's best two) in each round of main's.
# 2. The split's GPU test on main.
# 3. The one-token down in two chunks of groups (2026-11-30-s32-down-in-two-chunks.patch, in
#    /tmp/chunk): the kernel rows in both trees, alternately, then the decode step in one
#    process (2026-11-30-s32-down-chunks-ab.py: chunked against padded).
export DEADLINE_S=575
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
A=$PWD/benchmarks/archive
for t in old chunk; do
  mkdir -p /tmp/$t && tar cf - --exclude=./.llama-pack --exclude=./.whl . | tar xf - -C /tmp/$t
done
(cd /tmp/old && (patch -R -p1 -s <$A/2026-11-30-s32-copier-waits.patch || git apply -R $A/2026-11-30-s32-copier-waits.patch)) || since "old: patch failed"
(cd /tmp/chunk && (patch -p1 -s <$A/2026-11-30-s32-down-in-two-chunks.patch || git apply $A/2026-11-30-s32-down-in-two-chunks.patch)) || since "chunk: patch failed"
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
for r in 1 2 3; do
  timeout $(cap 110 10) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 \
    --out "$o/new-$r" >"$o/new-$r.txt" 2>&1
  since "round $r main (exit $?)"; grep -h "tok/s" "$o/new-$r.txt" | cut -c1-400 >>"$o/steps.txt"
  timeout $(cap 70 10) bash -c "cd /tmp/old && PYTHONPATH=/tmp/old:\$PYTHONPATH python3 -m benchmarks.moe_offload show $OFF --ncmoe '' --out $o/old-$r" >"$o/old-$r.txt" 2>&1
  since "round $r old (exit $?)"; grep -h "tok/s" "$o/old-$r.txt" | cut -c1-400 >>"$o/steps.txt"
done
HEARTH_GPU_TESTS=1 timeout $(cap 90 10) python3 -m pytest -q -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu.py -k "split or cpu_run_as_host" >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -5 >>"$o/steps.txt"
ROWS=(--tokens 1 --kernels-only --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down")
for r in 1 2; do
  for t in main chunk; do
    if [ $t = main ]; then d=$PWD; else d=/tmp/chunk; fi
    timeout $(cap 60 10) bash -c "cd $d && PYTHONPATH=$d:\$PYTHONPATH python3 -m benchmarks.kernels.moe \"\${@}\" --json $o/rows-$t-$r.json" _ "${ROWS[@]}" >"$o/rows-$t-$r.txt" 2>&1
    since "rows $t $r (exit $?)"; grep -i "qwen3" "$o/rows-$t-$r.txt" | tail -2 >>"$o/steps.txt"
  done
done
mkdir -p "$o/ab"
timeout $(cap 150 5) bash -c "cd /tmp/chunk && PYTHONPATH=/tmp/chunk:\$PYTHONPATH python3 $A/2026-11-30-s32-down-chunks-ab.py $Q $o/ab --variants chunked padded --rounds 2" >"$o/ab.txt" 2>&1
since "step ab (exit $?)"; tail -3 "$o/ab.txt" >>"$o/steps.txt"
gzip -f "$o"/ab/*.trace.json 2>/dev/null
since end
