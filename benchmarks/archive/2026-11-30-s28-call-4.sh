#!/usr/bin/env bash
# Session 28's fourth device call (one H200; carry .llama-pack and .whl): ggml's repacked experts
# on huge pages against 4 KiB pages (benchmarks/archive/2026-11-30-s28-huge-pages-ab.py: Qwen3-
# 30B-A3B, 20 layers' experts in RAM, the split of 3 and every pick by the CPU, 2 rounds), the
# CPU experts' and host pages' tests, and llama-bench --n-cpu-moe 18 and 20 once more.
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q &
writer=$!
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/engine/hearth/test_host_pages.py \
  tests/engine/hearth/test_cpu_experts.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -2 "$o/tests.txt" >>"$o/steps.txt"
wait $writer; since written
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag >>"$o/steps.txt"
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 400 60) python3 benchmarks/archive/2026-11-30-s28-huge-pages-ab.py $Q "$o/huge-ab.json" 2 \
  >"$o/huge-ab.txt" 2>&1
since "huge pages a/b (exit $?)"; cat "$o/huge-ab.txt" | cut -c1-300 >>"$o/steps.txt"
for n in 18 20; do
  timeout $(cap 25 3) llama-bench -m $Q -p 0 -n 128 -r 3 -fa 1 -ngl 99 -ncmoe $n -t 16 -o json \
    >"$o/llama$n.json" 2>"$o/llama$n.err"
  since "llama-bench -ncmoe $n (exit $?)"; grep -h '"avg_ts"' "$o/llama$n.json" >>"$o/steps.txt"
done
