#!/usr/bin/env bash
# (Run without llama_from_pack: the gpu-marked tests skipped, "llama.cpp here is not a GPU
# build"; call 6 ran them.)
# Session 40's fifth device call (one H200; carry .whl): GPU tests on the final main: a
# speculative check against decode steps in the paged cache (kivi4 among the formats: a step
# now writes its row in the attention's launch and seals after it, a check through the KV
# write), the engine against the reference and its graph against eager decode, then the
# attention's suite (the cache, positions, grouped attention, kivi4, page steps) as far as the
# call's time goes.
export DEADLINE_S=540
source benchmarks/gpu/call_prelude.sh c5
install_wheels
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 150 5) python3 -m pytest -q -p no:cacheprovider tests/engine/hearth/test_verify.py \
  -k "paged_cache or on_kernels or captured" >"$o/verify.txt" 2>&1
since "verify (exit $?)"; tail -3 "$o/verify.txt" >>"$o/steps.txt"
timeout $(cap 150 5) python3 -m pytest -q -p no:cacheprovider tests/engine/hearth/test_gpu.py \
  -k "every_architecture or graph_replays" >"$o/engine.txt" 2>&1
since "engine (exit $?)"; tail -3 "$o/engine.txt" >>"$o/steps.txt"
timeout $(cap 300 5) python3 -m pytest -q -p no:cacheprovider tests/kernels/test_kv_cache.py \
  tests/kernels/test_kv_cache_positions.py tests/kernels/test_grouped_attention.py \
  tests/kernels/test_kv_kivi.py tests/kernels/test_kv_page_step.py >"$o/attention.txt" 2>&1
since "attention (exit $?)"; tail -3 "$o/attention.txt" >>"$o/steps.txt"
since end
