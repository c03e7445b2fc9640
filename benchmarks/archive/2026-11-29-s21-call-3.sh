#!/usr/bin/env bash
# Session 21's third device call (one H200, a fresh machine; carry .llama-pack and .whl):
#   1. the rows GEMV's tile sweep at 1, 2 and 4 rows, Llama-3-8B's shapes in Q4_K and Q6_K
#      (benchmarks/kernels/gemv_rows.py --sweep, never run on a GPU so far): the 4-client
#      step's weight matmul (Q6_K ffn_down at 4 rows 49.3 us against 17.3 at one, session 17);
#   2. beside it, Qwen3-30B-A3B's random file written, then the model through the worker on
#      both engines (`hearth bench --engine both`: Best fit picks the Hearth engine for a
#      mixture of experts on sm_90 since session 20, whose speed so far is hearth_speed's).
source benchmarks/gpu/call_prelude.sh o3
install_wheels
llama_from_pack
since unpacked
v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( nice python3 -m benchmarks.hearth_speed --write-random qwen3-30b-a3b $Q.part --quant Q4_K_M \
    --vocab "$v/ggml-vocab-qwen2.gguf" && mv $Q.part $Q && sync ) >"$o/write.txt" 2>&1 &
writer=$!
timeout $(cap 260) python3 -m benchmarks.kernels.gemv_rows --rows 1,2,4 --sweep --json "$o/rows.json" \
  >"$o/rows.txt" 2>&1
since "rows sweep (exit $?)"; tail -30 "$o/rows.txt" >>"$o/steps.txt"
wait $writer; grep wrote "$o/write.txt" >>"$o/steps.txt"; since written
timeout $(cap 200) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $Q \
  --engine both --reps 1 --depth 0 --decode 128 --no-llama-bench >"$o/qwen3-worker.txt" 2>&1
since "qwen3 through the worker (exit $?)"; tail -12 "$o/qwen3-worker.txt" >>"$o/steps.txt"
since end
