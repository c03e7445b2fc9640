#!/usr/bin/env bash
# Session 25's fifth device call (one H200, a fresh machine; carry .llama-pack and .whl): main
# (a one-token down reading the ids now at 4 rows x 2 warps but for MXFP4's 8 x 2), and
#   1. the expert GEMV's GPU tests (kernels and engine), 16 workers;
#   2. the one-token shapes again, with gate/up's registers capped (64: no spill, 8 programs an
#      SM where 70 registers fit 7) and the down's one-token kernel at 16 warps;
#   3. Qwen3-30B-A3B tg128, gate/up at its default against the cap of 64 (`cap`), alternately;
#      then gpt-oss-20b the same way;
#   4. experts in RAM on a simulated 12 GiB card beside llama-bench's --n-cpu-moe settings;
#   5. Llama-3-8B through the worker (Hearth engine): the gauge's fraction with the copy rate
#      timed over 8 copies, beside hearth_speed's.
source benchmarks/gpu/call_prelude.sh o5
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
G=/tmp/models/gpt-oss-20b-random-mxfp4.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
( write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
  write_random gpt-oss-20b MXFP4_MOE ggml-vocab-llama-bpe.gguf $G
  write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L ) &
writer=$!
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_TEST_VOCAB="$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  HEARTH_GPU_TESTS=1 timeout 160 python3 -m pytest -n 16 -q -p no:cacheprovider --timeout 150 -rfE \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_one_token.py \
  tests/engine/hearth/test_moe.py >"$o/tests.txt" 2>&1
since "tests (exit $?)"; grep -E "^(FAILED|ERROR)| passed| failed" "$o/tests.txt" | tail -14 >>"$o/steps.txt"
timeout $(cap 80) python3 -m benchmarks.kernels.moe --tokens 1 --kernels-only --one-token \
  --cases "qwen3-30b-a3b gate+up,qwen3-30b-a3b down,gpt-oss-20b gate+up" \
  --json "$o/moe.json" >"$o/moe.txt" 2>&1
since "moe one token (exit $?)"; grep -h "ONE-TOKEN\|failed" "$o/moe.txt" >>"$o/steps.txt"
wait $writer; since written
mkdir -p /tmp/run
cat >/tmp/run/speed.py <<'PY'
import dataclasses
import sys

import kernels.moe_gemv as moe_gemv
from benchmarks.hearth_speed import main

if sys.argv[1] == "cap":  # a one-token gate/up's registers capped at 64
    default = moe_gemv.default_config

    def capped(fmt, mode, one_token=False):
        cfg = default(fmt, mode, one_token)
        if mode == moe_gemv.GATE_UP and one_token:
            cfg = dataclasses.replace(cfg, max_registers=64)
        return cfg

    moe_gemv.default_config = capped
raise SystemExit(main(sys.argv[2:]))
PY
ab() {  # NAME FILE RUNS
  for mode in $3; do
    [ "$(left)" -lt 200 ] && break
    timeout $(cap 70 150) python3 /tmp/run/speed.py $mode $2 --kv paged-f16 --depth 0 --tokens 128 \
      --json "$o/$1-$mode.json" >>"$o/$1-$mode.txt" 2>&1
    since "$1 $mode (exit $?)"; grep -h "tg128\|replays" "$o/$1-$mode.txt" | tail -2 >>"$o/steps.txt"
  done
}
ab qwen3 $Q "main cap main cap"
ab gpt-oss $G "main cap"
timeout $(cap 100 60) python3 -m benchmarks.moe_offload show --model $Q --card 12 --out "$o/offload" \
  --skip-cache >"$o/offload.txt" 2>&1
since "offload (exit $?)"; grep -h "tok/s\|x (the" "$o/offload.txt" | cut -c1-300 >>"$o/steps.txt"
timeout $(cap 80) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $L \
  --engine hearth --reps 1 --depth 0 --decode 128 --no-llama-bench >"$o/llama8b-worker.txt" 2>&1
since "worker, 8b (exit $?)"; grep -h "decode 128\|bound\|copy rate" "$o/llama8b-worker.txt" >>"$o/steps.txt"
since end
