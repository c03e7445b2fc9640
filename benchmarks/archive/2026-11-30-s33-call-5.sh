#!/usr/bin/env bash
# Session 33's fifth device call (one H200; carry .llama-pack and .whl): the GPU tests of main's
# final engine and kernel code: the Hearth engine's GPU files (the split's graph pieces with
# the copier launching the next piece among them), the batch's, and the kernels' (the MoE
# GEMVs at full shapes, the one-token down, the unpack, the published sum).
export DEADLINE_S=500
source benchmarks/gpu/call_prelude.sh c5
install_wheels
llama_from_pack
since unpacked
export TRITON_CACHE_DIR=/tmp/tc
HEARTH_GPU_TESTS=1 timeout $(cap 440 10) python3 -m pytest -q -p no:cacheprovider \
  tests/engine/hearth/test_gpu.py tests/engine/hearth/test_gpu_batch.py \
  tests/kernels/test_moe_gemv_gpu.py tests/kernels/test_moe_grouped_gemm_gpu.py \
  tests/kernels/test_moe_one_token.py tests/kernels/test_expert_unpack.py \
  tests/kernels/test_host_published.py tests/kernels/test_norms_and_activations.py \
  >$o/tests.txt 2>&1
since "tests (exit $?)"; tail -4 $o/tests.txt >>$o/steps.txt
since end
