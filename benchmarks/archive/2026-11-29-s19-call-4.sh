#!/usr/bin/env bash
# Session 19's fourth device call (one H200; carry .whl): call 3 named six failing GPU tests but
# its run was cut before pytest printed why; these six alone, with their tracebacks
# (docs/measurements/2026-11-29-s19-call-4/fails.txt).
mkdir -p $OUT; python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site
HEARTH_GPU_TESTS=1 timeout 200 python3 -m pytest -n 6 -p no:cacheprovider --timeout 150 --tb=long -q \
  "tests/engine/hearth/test_paged_cache.py::test_a_chunked_prefill_gives_the_logits_of_a_mask_made_at_every_layer" \
  "tests/engine/hearth/test_gpu.py::test_a_chunk_whose_capture_fails_runs_eagerly_and_other_shapes_still_replay" \
  "tests/engine/hearth/test_prefill_graph.py::test_chunks_as_a_graph_runs_them_give_the_logits_and_cache_of_exact_ones" \
  > $OUT/fails.txt 2>&1
