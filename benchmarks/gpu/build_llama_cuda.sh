#!/usr/bin/env bash
# On an NVIDIA machine without network: build the vendored llama.cpp of a bundle
# (benchmarks/gpu/make_bundle.sh) with CUDA for the local GPU and make llama-cpp-python use it.
# Builds the shared libraries, llama.cpp's reference tools (llama-bench, llama-quantize,
# llama-fit-params), llama-server and the RPC backend's server (ggml-rpc-server; GGML_RPC=ON);
# LLAMA_EXTRA_TARGETS="" leaves those two out (a minute less). About 3 minutes on 16 cores for
# one GPU arch; nothing is done when BUILD_ROOT/env.sh exists.
#
# Usage: benchmarks/gpu/build_llama_cuda.sh BUNDLE_DIR [BUILD_ROOT]   (BUILD_ROOT: /tmp/llama)
#        LLAMA_PATCHES=1 ...   applies installers/patches/ first (what users get)
#        (with .llama-pack/ from benchmarks/gpu/pack_llama_build.sh: unpacked, not built)
# Then:  source BUILD_ROOT/env.sh   (sets PYTHONPATH, LLAMA_CPP_LIB_PATH and PATH)
set -euo pipefail
bundle=${1:?usage: build_llama_cuda.sh BUNDLE_DIR [BUILD_ROOT]}
root=${2:-/tmp/llama}
mkdir -p "$root"
# A build packed by benchmarks/gpu/pack_llama_build.sh on an earlier machine of the same image
# (.llama-pack/ in the repository root, carried): unpacked in seconds instead of built
pack=${LLAMA_PACK:-$(dirname "$0")/../../.llama-pack}
if [ ! -f "$root/env.sh" ] && [ "$root" = /tmp/llama ] && [ -f "$pack/llama-build.tar.xz.aa" ]; then
  cat "$pack"/llama-build.tar.xz.* | xz -d -T0 | tar -xf - -C /
  echo "unpacked the build in $pack"
fi
if [ ! -f "$root/env.sh" ]; then
  tar -xzf "$bundle/llama-cpp-python-src.tgz" -C "$root"
  src=$(ls -d "$root"/llama_cpp_python-*)
  if [ -n "${LLAMA_PATCHES:-}" ]; then
    # Hearth's llama.cpp patches (installers/patches/), as installers/build_engine.py applies
    # them to the engine users install; off by default so that figures compare with earlier runs
    python3 "$(dirname "$0")/../../installers/source_patches.py" "$src/vendor/llama.cpp" cuda \
      | tee "$root/patches.log"
  fi
  ui="$src/vendor/llama.cpp/tools/ui"
  if [ ! -d "$ui" ]; then
    # The sdist leaves llama.cpp's web UI out; llama-server links it. A stand-in with no
    # assets lets llama-server build and answer its API (no browser page).
    mkdir -p "$ui"
    cat >"$ui/CMakeLists.txt" <<'CMAKE'
add_library(llama-ui INTERFACE)
target_include_directories(llama-ui INTERFACE ${CMAKE_CURRENT_SOURCE_DIR})
add_custom_target(llama-ui-assets)
CMAKE
    cat >"$ui/ui.h" <<'HEADER'
#pragma once
#include <cstddef>
#include <string>
#include <vector>
struct llama_ui_asset { std::string name; const unsigned char * data; size_t size; };
inline const std::vector<llama_ui_asset> & llama_ui_get_assets() {
    static const std::vector<llama_ui_asset> none;
    return none;
}
HEADER
  fi
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.[:space:]')
  # The shared C++ runtime, always. On the H100 image the build linked libstdc++ statically
  # (why is not established: g++ there finds libstdc++.so and LDFLAGS is empty): every library
  # carried its own copy and exported its std::locale symbols, so torch imported after it
  # aborted (free(): invalid pointer) and a model loaded after numpy or torch crashed
  # (benchmarks/backends/torch_beside_llama.sh, docs/hearth-engine.md). A directory holding
  # only libstdc++.so -> the runtime's libstdc++.so.6, first on the link line, fixed it there.
  cxxlib="$root/cxx-runtime"; mkdir -p "$cxxlib"
  runtime=$(g++ -print-file-name=libstdc++.so.6)
  [ -e "$runtime" ] || runtime=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
  ln -sf "$runtime" "$cxxlib/libstdc++.so"
  { echo "g++ finds libstdc++.so at: $(g++ -print-file-name=libstdc++.so); runtime $runtime; LDFLAGS='${LDFLAGS-}'"; } >"$root/cxx-runtime.log"
  env -u LDFLAGS cmake -S "$src/vendor/llama.cpp" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_SHARED_LINKER_FLAGS="-L$cxxlib" -DCMAKE_EXE_LINKER_FLAGS="-L$cxxlib" \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DGGML_RPC=ON >"$root/configure.log"
  cmake --build "$src/build" -j"$(nproc)" \
    --target llama mtmd llama-bench llama-quantize llama-fit-params ${LLAMA_EXTRA_TARGETS-llama-server ggml-rpc-server} >"$root/build.log"
  if ! readelf -d "$src/build/bin/libllama.so" | grep -q 'libstdc++'; then
    echo "WARNING: libllama.so links the C++ runtime statically (see $root/cxx-runtime.log)" | tee -a "$root/cxx-runtime.log" >&2
  fi
  site="$root/site"
  python3 -m pip install -q --no-index --no-deps --target "$site" "$bundle"/wheels/*.whl
  cp -r "$src/llama_cpp" "$site/"
  cat >"$root/env.sh" <<ENV
export PYTHONPATH="$site\${PYTHONPATH:+:\$PYTHONPATH}"
export LLAMA_CPP_LIB_PATH="$src/build/bin"
export PATH="$src/build/bin:\$PATH"
ENV
fi
echo "built: source $root/env.sh"
