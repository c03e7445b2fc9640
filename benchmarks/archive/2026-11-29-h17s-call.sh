#!/usr/bin/env bash
# Branch h17s (issue 38, deliverable 4): speculative checks on the Hearth engine, one H200, the
# starter model at /tmp/starter/model.gguf. `bash THIS OUTDIR` from the repository root; about
# 3 minutes once llama.cpp's CUDA build exists (show_env.sh builds it otherwise). Steps in order
# of importance, each under its own timeout; /work/gpu-requests/h17s.md says what each decides.
set -uo pipefail
out=${1:-out}; mkdir -p "$out"
OUT=$out source benchmarks/gpu/show_env.sh
[ -d /tmp/site ] && export PYTHONPATH="$PYTHONPATH:/tmp/site"
m=/tmp/starter/model.gguf
ls -la "$m"

# 1. Greedy identity on the GPU: checks equal decode steps bit for bit (the engine's tests on
#    kernels/, the captured and padded checks, the kernels' strided reads), then the same engine
#    tests with the GEMV's several rows a program (HEARTH_CHECK_ROWS_PER_PROGRAM=4).
HEARTH_GPU_TESTS=1 timeout 240 python3 -m pytest -q -rf -p no:cacheprovider \
  tests/engine/hearth/test_verify.py tests/engine/hearth/test_check_graph.py \
  tests/kernels/test_gemv_rows_alike.py \
  "tests/kernels/test_kv_cache.py::test_one_sequence_given_per_query_with_splits_as_one_gives_each_lone_step_s_bits" \
  tests/kernels/test_kv_cache.py::test_rows_of_a_wider_product_are_written_as_their_copies \
  tests/kernels/test_norms_and_activations.py::test_swiglu \
  tests/kernels/test_norms_and_activations.py::test_swiglu_reads_the_columns_of_a_joined_product_in_place \
  >"$out/tests.log" 2>&1
echo "tests: exit $?"; tail -3 "$out/tests.log"
HEARTH_GPU_TESTS=1 HEARTH_CHECK_ROWS_PER_PROGRAM=4 timeout 120 python3 -m pytest -q -rf \
  -p no:cacheprovider tests/engine/hearth/test_verify.py -k "kernels or paged or captured" \
  >"$out/tests-rows4.log" 2>&1
echo "tests, 4 rows a program: exit $?"; tail -3 "$out/tests-rows4.log"

# 2. Where a check's time goes: GPU and host time of checks of 2/4/8/16 rows in plain steps,
#    kernels by name, with 1, 2 and 4 rows a program in the check's GEMVs (and their bits).
timeout 180 python3 -m benchmarks.check_profile "$m" --rows-per-program 1,2,4 --out "$out" \
  >"$out/check-profile.txt" 2>&1
echo "check profile: exit $?"; grep -v "^  " "$out/check-profile.txt" | tail -14

# 3. The show: the four tasks, plain against prompt lookup (5 pairs), checks as this branch
#    makes them (graphs of 2/4/8/16 rows captured at the load).
timeout 150 python3 -m benchmarks.speculative_gpu "$m" --engine hearth --out "$out" 2>&1 \
  | grep -v "^llama_\|^print_info\|^load" >"$out/speculative-hearth.txt"
echo "speculative, this branch: exit $?"; tail -14 "$out/speculative-hearth.txt"

# 4. The same with 2 rows a program in the check's GEMVs (Q4_1: 128 registers, no spill; 4 rows
#    take 254, and the Q8_0 output matrix spills: sm_90 compile here), then with a graph per exact size
#    captured at its first use (the old capture, for the spread), 3 pairs each.
# (their JSON stays on the machine: at most 8 files come back)
HEARTH_CHECK_ROWS_PER_PROGRAM=2 timeout 120 python3 -m benchmarks.speculative_gpu "$m" \
  --engine hearth --reps 3 --out /tmp/h17s-rows2 2>&1 \
  | grep -v "^llama_\|^print_info\|^load" >"$out/speculative-hearth-rows2.txt"
echo "speculative, 2 rows a program: exit $?"; tail -12 "$out/speculative-hearth-rows2.txt"
HEARTH_CHECK_BUCKETS=0 timeout 120 python3 -m benchmarks.speculative_gpu "$m" \
  --engine hearth --reps 3 --out /tmp/h17s-exact 2>&1 \
  | grep -v "^llama_\|^print_info\|^load" >"$out/speculative-hearth-exact.txt"
echo "speculative, a graph per exact size: exit $?"; tail -12 "$out/speculative-hearth-exact.txt"
