#!/usr/bin/env bash
# Session 24's sixth device call (one H200, a fresh machine; carry .llama-pack and .whl), main:
# Llama-3-8B through the worker, the Hearth engine (its decode step now writing K/V in the
# attention's launch) and llama.cpp in one run, three repetitions each (`hearth bench --engine
# both`), after a hearth_speed run that fills the Triton cache. The worker had only Qwen3's.
source benchmarks/gpu/call_prelude.sh o6
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L; since written
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 90) python3 -m benchmarks.hearth_speed $L --kv paged-f16 --depth 0 --tokens 128 \
  --json "$o/llama8b-warm.json" >"$o/llama8b-warm.txt" 2>&1
since "llama 8b hearth_speed (exit $?)"; grep -h "tg128\|replays" "$o/llama8b-warm.txt" >>"$o/steps.txt"
timeout $(cap 240) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $L \
  --engine both --reps 3 --depth 0 --decode 128 --no-llama-bench >"$o/llama8b-worker.txt" 2>&1
since "worker, both engines (exit $?)"; tail -22 "$o/llama8b-worker.txt" >>"$o/steps.txt"
since end
