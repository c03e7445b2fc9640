#!/usr/bin/env bash
# On the GPU machine, after build_llama_cuda.sh: pack /tmp/llama's build (libraries, tools,
# llama-cpp-python's site, the two vocabularies the benchmarks use) into parts under the
# device's 16 MiB-per-file limit, for a later call to carry as .llama-pack/ (about 46 MB, three
# parts; build_llama_cuda.sh unpacks it in seconds instead of building for five minutes).
#
#   bash benchmarks/gpu/pack_llama_build.sh OUT_DIR
set -euo pipefail
out=${1:?usage: pack_llama_build.sh OUT_DIR}
src=$(ls -d /tmp/llama/llama_cpp_python-*)
tar -cf - -C / tmp/llama/env.sh tmp/llama/site tmp/llama/cxx-runtime "${src#/}/build/bin" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf" \
  "${src#/}/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf" \
  | xz -T16 -6 | split -b 15900000 - "$out/llama-build.tar.xz."
ls -l "$out"/llama-build.tar.xz.*
