#!/usr/bin/env bash
# h17p (issue 34): a prefill chunk replayed from a CUDA graph (engine/hearth/prefill_graph.py)
# against the same chunk launched eagerly, in one process per model (prefill_profile --both).
# Run from the repository root, on one H200, in the session's call environment (torch 2.11 +
# Triton 3.6); the random model files at /tmp/models (show_env.sh's random_model); $1: the
# output folder. About 2-3 minutes.
#   tests.txt       the GPU tests: chunks replayed from graphs (one captured, one replayed at
#                   other positions, partial and padded) give the eager chunks' logits and K/V
#                   (plain cache, paged f16, q8/rot4, kivi4; llama, qwen3moe through the grouped
#                   GEMM, gpt-oss with sinks and SWA), decode after them unchanged; the padding
#                   and key-rounding test on the GPU; the decode graph tests beside them
#   qwen3.txt       Qwen3-30B-A3B Q4_K_M, pp512 chunk: eager then graphs (timed runs, host time,
#                   memory reserved), then the profiles of the graph variant
#   gpt-oss.txt     gpt-oss-20b MXFP4, the same
#   llama.txt       Llama-3-8B Q4_K_M, the same
set -uo pipefail
o=${1:?usage: $0 OUTPUT_FOLDER}
mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$(date +%s)
since() { echo "$1 after $(( $(date +%s) - start )) s" | tee -a "$o/steps.txt"; }
HEARTH_GPU_TESTS=1 timeout 150 python3 -m pytest -n 8 -q -p no:cacheprovider -rfE \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_prefill_graph.py \
  -k "prefill_graphs or capture_fails or chunks_as_a_graph or keys_read or graph_replays or launching_ahead" \
  >"$o/tests.txt" 2>&1
since "tests (exit $?)"; tail -3 "$o/tests.txt" >>"$o/steps.txt"
for m in qwen3:/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf \
         gpt-oss:/tmp/models/gpt-oss-20b-random-mxfp4.gguf \
         llama:/tmp/models/llama3-8b-random-q4_k_m.gguf; do
  name=${m%%:*}; file=${m#*:}
  timeout 150 python3 -m benchmarks.prefill_profile "$file" --both --runs 10 \
    >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -E "^== |median wall|host time|runs eagerly|captured with" "$o/$name.txt" >>"$o/steps.txt"
done
