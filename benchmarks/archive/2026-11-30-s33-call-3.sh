#!/usr/bin/env bash
# Session 33's third device call (one H200; carry .llama-pack and .whl): experts in RAM, split 3
# of 8, Qwen3-30B-A3B with 20 layers' experts in RAM: ggml's threads swept in one process
# (2026-11-30-s33-threads-sweep.py: 15, 13, 11, 9, three rounds in turn), the CPU's topology
# and the driver's version, llama-bench --n-cpu-moe 18 and 20 beside.
export DEADLINE_S=400
source benchmarks/gpu/call_prelude.sh c3
install_wheels
llama_from_pack
since unpacked
Q=/tmp/models/qwen3-30b-a3b-random-q4_k_m.gguf
write_random qwen3-30b-a3b Q4_K_M ggml-vocab-qwen2.gguf $Q
since written
export TRITON_CACHE_DIR=/tmp/tc
A=$PWD/benchmarks/archive
(lscpu; nvidia-smi --query-gpu=driver_version,name --format=csv) >$o/machine.txt 2>&1
python3 -c "import ctypes; d=ctypes.CDLL('libcuda.so.1'); print('cuMemcpyBatchAsync', hasattr(d, 'cuMemcpyBatchAsync'), hasattr(d, 'cuMemcpyBatchAsync_v2'))" >>$o/machine.txt 2>&1
timeout $(cap 200 10) python3 $A/2026-11-30-s33-threads-sweep.py $Q $o >$o/sweep.txt 2>&1
since "sweep (exit $?)"; grep "^threads" $o/sweep.txt >>$o/steps.txt
for n in 18 20; do
  timeout $(cap 60 5) llama-bench -m $Q -ngl 99 -ncmoe $n -p 0 -n 128 -r 2 -fa 1 -t 16 -o md >$o/llama-bench-$n.txt 2>&1
  since "llama-bench $n (exit $?)"; grep "tg128" $o/llama-bench-$n.txt >>$o/steps.txt
done
since end
