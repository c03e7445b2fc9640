#!/usr/bin/env bash
# Session 24's fourth device call (one H200, a fresh machine; carry .llama-pack and .whl), main:
#   1. the decode attention's launch shapes swept at 32k for kivi4/rot4 and f16/f16 (Llama-3-8B's
#      heads; issue 35's kivi4/rot4 at 32k is 1.90x llama.cpp's f16 against 2.0x; the default
#      shapes were chosen on an H100, docs/decisions/0012);
#   2. Qwen3-30B-A3B through the worker, the Hearth engine and llama.cpp in one run, three
#      repetitions each (`hearth bench --engine both`), after a hearth_speed run that fills the
#      Triton cache (the gap docs/performance.md's "Not measured yet" names).
source benchmarks/gpu/call_prelude.sh o4
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150) python3 -m benchmarks.kernels --ops decode_attention --pairs kivi4/rot4,f16/f16 \
  --contexts 32768 --attention-sweep 32768 --sweep-pages 32 128 --json "$o/sweep.json" \
  >"$o/sweep.txt" 2>&1
since "sweep (exit $?)"; grep -h "decode_attention" "$o/sweep.txt" | cut -c1-150 >>"$o/steps.txt"
wait $writer; since written
timeout $(cap 90) python3 -m benchmarks.hearth_speed $Q --kv paged-f16 --depth 0 --tokens 128 \
  --json "$o/qwen3-warm.json" >"$o/qwen3-warm.txt" 2>&1
since "qwen3 hearth_speed (exit $?)"; grep -h "tg128\|replays" "$o/qwen3-warm.txt" >>"$o/steps.txt"
timeout $(cap 300) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $Q \
  --engine both --reps 3 --depth 0 --decode 128 --no-llama-bench >"$o/qwen3-worker.txt" 2>&1
since "worker, both engines (exit $?)"; tail -25 "$o/qwen3-worker.txt" >>"$o/steps.txt"
since end
