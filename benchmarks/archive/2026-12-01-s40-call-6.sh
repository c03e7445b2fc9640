#!/usr/bin/env bash
# Session 40's sixth device call (one H200; carry .llama-pack and .whl): call 5's gpu-marked
# tests, which it skipped (no llama.cpp GPU build unpacked): a speculative check against
# decode steps in the paged cache (kivi4 among the formats: a step writes its row in the
# attention's launch and seals after it, a check through the KV write), the engine against
# the reference and its graph against eager decode, the attention's page-step flags.
export DEADLINE_S=330
source benchmarks/gpu/call_prelude.sh c6
install_wheels
llama_from_pack
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 120 5) python3 -m pytest -q -p no:cacheprovider tests/engine/hearth/test_verify.py \
  -k "paged_cache or on_kernels or captured" >"$o/verify.txt" 2>&1
since "verify (exit $?)"; tail -3 "$o/verify.txt" >>"$o/steps.txt"
timeout $(cap 100 5) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_kv_page_step.py \
  -m gpu >"$o/page-step.txt" 2>&1
since "page steps (exit $?)"; tail -3 "$o/page-step.txt" >>"$o/steps.txt"
timeout $(cap 150 5) python3 -m pytest -q -p no:cacheprovider tests/engine/hearth/test_gpu.py \
  -k "every_architecture or graph_replays" >"$o/engine.txt" 2>&1
since "engine (exit $?)"; tail -3 "$o/engine.txt" >>"$o/steps.txt"
since end
