#!/usr/bin/env bash
# Session 42's first device call (one H200; carry .gpu-bundle and .whl), on a tree that holds
# session 41's kivi4/rot4 sealed pages read by halves as a tuning switch (off by default, so
# the engine runs as main): llama.cpp built and packed into $OUT/pack (the next calls carry it
# as .llama-pack) while the random-block files are written and the engine's 32k step runs, by
# halves against a page a step as one tile, alternately in one process (both models, kivi4/rot4,
# 2 rounds); then both models beside llama-bench of the same build.
export DEADLINE_S=570
source benchmarks/gpu/call_prelude.sh c1
install_wheels
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
  >"$o/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  >>"$o/gpu.txt" 2>&1
( bash benchmarks/gpu/build_llama_cuda.sh .gpu-bundle /tmp/llama >/tmp/logs/build.txt 2>&1 \
  && mkdir -p "$R/pack" && bash benchmarks/gpu/pack_llama_build.sh "$R/pack" >/tmp/logs/pack.txt 2>&1
  echo "build and pack exit $? after $(( $(date +%s) - start )) s" >>"$o/steps.txt" ) &
builder=$!
mkdir -p /tmp/vocab
tar -xzf .gpu-bundle/llama-cpp-python-src.tgz -C /tmp/vocab --wildcards '*/models/ggml-vocab-*.gguf'
vocab() { ls /tmp/vocab/llama_cpp_python-*/vendor/llama.cpp/models/$1; }
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
python3 -m benchmarks.hearth_speed --write-random qwen3-30b-a3b $Q --quant Q4_K_M \
  --vocab "$(vocab ggml-vocab-qwen2.gguf)" >>"$o/write.txt" 2>&1 &
wq=$!
python3 -m benchmarks.hearth_speed --write-random llama3-8b $L --quant Q4_K_M \
  --vocab "$(vocab ggml-vocab-llama-bpe.gguf)" >>"$o/write.txt" 2>&1 &
wl=$!
export TRITON_CACHE_DIR=/tmp/tc
AB=benchmarks/archive/2026-11-30-s29-step-ab.py
for m in qwen3:$Q:$wq llama:$L:$wl; do
  IFS=: read -r name file writer <<<"$m"
  wait "$writer"; since "written $name"
  tag=$name-32k; mkdir -p "$o/$tag"
  timeout $(cap 150 200) python3 $AB "$file" "$o/$tag" --rounds 2 --replays 2 --kv kivi4/rot4 \
    --slots 32832 --depth 32768 --variants main halves >"$o/$tag.txt" 2>&1
  since "step $tag (exit $?)"; grep "tok/s" "$o/$tag.txt" | sed "s/^/$tag /" >>"$o/steps.txt"
done
while kill -0 $builder 2>/dev/null && [ "$(left)" -gt 150 ]; do sleep 2; done
source /tmp/llama/env.sh 2>/dev/null || echo "no llama.cpp build" >>"$o/steps.txt"
export PYTHONPATH="$PWD:$PYTHONPATH:/tmp/site"
for m in qwen3:$Q llama:$L; do
  name=${m%%:*}
  timeout $(cap 130 3) python3 -m benchmarks.hearth_speed ${m#*:} --llama-bench --tokens 128 \
    --kv kivi4/rot4 --json "$o/$name.json" >"$o/$name.txt" 2>&1
  since "$name (exit $?)"; grep -h "pp512\|tg128\|depth" "$o/$name.txt" | head -4 >>"$o/steps.txt"
done
gzip -f "$o"/*/*.trace.json 2>/dev/null
since end
