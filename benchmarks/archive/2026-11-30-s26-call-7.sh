#!/usr/bin/env bash
# Session 26's seventh device call (one H200; carry .llama-pack and .whl): the load with the
# uploader's 32 MiB reads and Triton's setup started in the background (main), against the
# reads of 8 MiB and no warm-up (before), each load in a fresh process from a cold and a warm
# page cache, beside llama.cpp's (benchmarks/archive/2026-11-30-s26-load-ab.py, 4 cold and 3
# warm rounds); and whether the worker's warm-up with Triton's setup makes a CUDA context.
source benchmarks/gpu/call_prelude.sh o7
install_wheels
llama_from_pack
since unpacked
L=/tmp/models/llama3-8b-random-q4_k_m.gguf
write_random llama3-8b Q4_K_M ggml-vocab-llama-bpe.gguf $L &
writer=$!
rm -f /tmp/warmed
python3 - >"$o/prewarm-context.txt" 2>&1 <<'PY' &
import os, time
started = time.perf_counter()
import torch
torch.cuda.is_available()
from kernels.compiler_warmup import warm_compiler
imported = time.perf_counter()
warm_compiler()
print(f"imports {imported - started:.2f} s, warm_compiler {time.perf_counter() - imported:.2f} s")
print("pid", os.getpid(), flush=True)
open("/tmp/warmed", "w").write(str(os.getpid()))
time.sleep(5)
PY
for _ in $(seq 60); do [ -f /tmp/warmed ] && break; sleep 0.5; done
sleep 1
echo "compute apps after the warm-up (none: no CUDA context):" >>"$o/prewarm-context.txt"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$o/prewarm-context.txt" 2>&1
wait
since "written, prewarm checked"; cat "$o/prewarm-context.txt" >>"$o/steps.txt"
export TRITON_CACHE_DIR=/tmp/tc
timeout $(cap 430) python3 benchmarks/archive/2026-11-30-s26-load-ab.py $L "$o/load-ab.json" 4 \
  >"$o/load-ab.txt" 2>&1
since "load a/b (exit $?)"; tail -12 "$o/load-ab.txt" >>"$o/steps.txt"
