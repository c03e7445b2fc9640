#!/usr/bin/env bash
# Prepared at the end of session 21 (one H200; carry .llama-pack and .whl): Qwen3-30B-A3B
# through the worker on both engines, two repetitions (session 21 ran one on an empty Triton
# cache: load 64.2 s against 3.4 s, first prefill 0.59x, decode 1.62x; the second load and
# prefill say what a user meets after the first).
source benchmarks/gpu/call_prelude.sh o1
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 480) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $Q \
  --engine both --reps 2 --depth 0 --decode 128 --no-llama-bench >"$o/qwen3-worker.txt" 2>&1
since "qwen3 through the worker (exit $?)"; tail -14 "$o/qwen3-worker.txt" >>"$o/steps.txt"
since end
