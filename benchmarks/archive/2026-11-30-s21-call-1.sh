#!/usr/bin/env bash
# Prepared at the end of session 20 for the next session's first call (one H200, a fresh
# machine; carry .gpu-bundle and .whl, both from `bash benchmarks/gpu/make_bundle.sh`; .whl
# alone is installed: it holds the bundle's gguf and diskcache too). llama.cpp is built here
# (about 280 s) and packed into $OUT for the later calls, while the kernels' GPU tests run
# beside the build; then serving in the order (1, 4, 16 and 64 clients) on an empty
# Triton cache, which session 20 ran only in parts (1-8 in call 3, 16 and 64 first after the
# start in call 4, where both servers' 16-client TTFT differed from session 19's by 2-14x);
# then, if time is left, Qwen3-30B-A3B through the worker (`hearth bench --engine both`).
source benchmarks/gpu/call_prelude.sh o1
DEADLINE=${DEADLINE_S:-565}
install_wheels
( bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1
  echo "build exit $?" >>/tmp/logs/build.txt ) &
builder=$!
( for i in $(seq 60); do ls /tmp/llama/llama_cpp_python-*/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf >/dev/null 2>&1 && break; sleep 1; done
  v=$(ls -d /tmp/llama/llama_cpp_python-*)/vendor/llama.cpp/models
  for spec in "llama3-8b Q4_K_M llama3-8b-random-q4_k_m ggml-vocab-llama-bpe.gguf" \
              "qwen3-30b-a3b Q4_K_M qwen3-30b-a3b-random-q4_k_m ggml-vocab-qwen2.gguf"; do
    set -- $spec; f=/tmp/models/$3.gguf
    [ -f "$f" ] || { nice python3 -m benchmarks.hearth_speed --write-random $1 "$f.part" --quant $2 --vocab "$v/$4" && mv "$f.part" "$f" && sync; }
  done ) >/tmp/logs/write.txt 2>&1 &
writer=$!
# the kernels' GPU tests need no llama.cpp: beside the build
HEARTH_GPU_TESTS=1 timeout 170 python3 -m pytest -n 8 -v -p no:cacheprovider --timeout 120 -rfE \
  tests/kernels/ >"$o/tests-kernels.txt" 2>&1
echo "kernel tests: exit $?" >>"$o/steps.txt"; grep -E "^(FAILED|ERROR)|passed|failed" "$o/tests-kernels.txt" | tail -20 >>"$o/steps.txt"
grep -cE "PASSED" "$o/tests-kernels.txt" | sed 's/^/passed (by -v lines): /' >>"$o/steps.txt"
since "kernel tests"
wait $builder; tail -2 /tmp/logs/build.txt >>"$o/steps.txt"; since built
( bash benchmarks/gpu/pack_llama_build.sh "$R" >"$o/pack.txt" 2>&1 ) &
wait $writer; tail -2 /tmp/logs/write.txt >>"$o/steps.txt"; since files
source /tmp/llama/env.sh
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/site"
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
rm -rf /tmp/tc-serve
TRITON_CACHE_DIR=/tmp/tc-serve timeout $(cap 230) python3 benchmarks/server_concurrency.py $L \
  --llama-server "$(command -v llama-server)" --hearth-engines hearth --clients 1 4 16 64 \
  --max-tokens 512 --prompt-words 64 --ctx 1024 --rounds 1 --level-timeout 60 --logs /tmp/logs \
  --json "$o/server.json" >"$o/server.txt" 2>&1
since "serving (exit $?)"; grep -h "answering\|/ llama-server" "$o/server.txt" >>"$o/steps.txt"
find /tmp/tc-serve -name "*.json" ! -name "__grp__*" -printf "%TH:%TM:%TS %f\n" | sort >"$o/compiled.txt"
# a mixture of experts through the worker (Best fit picks the Hearth engine for one on sm_90
# since session 20's figures; its speed so far only from benchmarks.hearth_speed, no worker)
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
[ "$(left)" -gt 40 ] && { timeout $(cap 90) python3 -c "import sys; from engine.cli import main; sys.exit(main())" bench $Q --engine both --reps 1 \
  --depth 0 --decode 128 --no-llama-bench >"$o/qwen3-worker.txt" 2>&1
  since "qwen3 through the worker (exit $?)"; tail -8 "$o/qwen3-worker.txt" >>"$o/steps.txt"; }
wait; cat "$o/pack.txt" >>"$o/steps.txt"
since end
