#!/usr/bin/env bash
# Session 35's first device call (one H200; carry .llama-pack and .whl): ggml's cost a split's
# call by the graph's shape (2026-11-30-s35-ggml-graph-probe.py, 15 threads as the engine runs
# them), then experts in RAM on main as it stands, two rounds beside llama-bench -ncmoe 18, 20.
export DEADLINE_S=520
source benchmarks/gpu/call_prelude.sh c1
install_wheels
llama_from_pack
since unpacked
timeout $(cap 150 5) python3 benchmarks/archive/2026-11-30-s35-ggml-graph-probe.py "$o/probe.json" 15 \
  >"$o/probe.txt" 2>&1
since "probe (exit $?)"; grep -v "^repack" "$o/probe.txt" | tail -8 >>"$o/steps.txt"
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
OFF="--model $Q --card 12 --skip-cache --skip-cpu --skip-in-place --split-picks 3"
timeout $(cap 200 5) python3 -m benchmarks.moe_offload show $OFF --ncmoe 18,20 --rounds 2 \
  --out "$o/main" >"$o/main.txt" 2>&1
since "main (exit $?)"; grep -h "Hearth engine\|llama-bench tg\|best Hearth" "$o/main.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
since end
