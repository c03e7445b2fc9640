#!/usr/bin/env bash
# Session 35's fifth device call (one H200; carry .llama-pack and .whl): gpt-oss-20b (random
# MXFP4) with experts in RAM on a simulated 8 GiB card, the planner's split (2 of 4 picks by
# ggml planned, tuned at load), two rounds beside llama-bench at the settings around llama.cpp's
# planned --n-cpu-moe and all 24.
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c5
install_wheels
llama_from_pack
since unpacked
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
write_random gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf $G
since written
export TRITON_CACHE_DIR=/tmp/tc
OFF="--model $G --skip-cache --skip-cpu --skip-in-place --split-picks 2"
timeout $(cap 400 5) python3 -m benchmarks.moe_offload show $OFF --card 8 --rounds 2 \
  --out "$o/card8" >"$o/card8.txt" 2>&1
since "card8 (exit $?)"; grep -h "planner\|Hearth engine\|llama-bench tg\|best Hearth" "$o/card8.txt" | sed 's/(load.*pauses/pauses/' | cut -c1-900 >>"$o/steps.txt"
since end
