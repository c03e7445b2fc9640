#!/usr/bin/env bash
# Pack what an offline NVIDIA machine needs to build the engine's llama.cpp with CUDA and run the
# GPU tests and benchmarks there: a trimmed llama-cpp-python source tree (it vendors llama.cpp)
# and a few pure-Python wheels the machine's image lacks. Run it where the package registries
# are reachable; the bundle then travels with the working tree (keep it out of git: .gitignore).
#
# Usage: benchmarks/gpu/make_bundle.sh [OUT_DIR] [LLAMA_CPP_PYTHON_VERSION]
#        (defaults: .gpu-bundle and 0.3.36, the version pyproject.toml pins)
# Result: OUT_DIR/llama-cpp-python-src.tgz (about 13 MB) and OUT_DIR/wheels/*.whl, which
#         benchmarks/gpu/build_llama_cuda.sh OUT_DIR builds from on the device.
set -euo pipefail
out=${1:-.gpu-bundle}
ver=${2:-0.3.36}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out/wheels"

python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp/sdist" "llama-cpp-python==$ver"
tar -xzf "$tmp"/sdist/llama_cpp_python-*.tar.gz -C "$tmp"
src=$(ls -d "$tmp"/llama_cpp_python-*/)
lc="$src/vendor/llama.cpp"
# What a build never reads: git history, docs, the web UI, media, and the vocab files but the
# two the benchmarks use (Llama-3's for the synthetic Llama-3-8B, Qwen2's)
rm -rf "$src/.git" "$lc/docs" "$lc/benches" "$lc/media" "$lc/tools/ui" "$lc"/tools/mtmd/*.mp4
find "$lc/models" -name '*.gguf' ! -name 'ggml-vocab-llama-bpe.gguf' \
  ! -name 'ggml-vocab-qwen2.gguf' -delete
find "$lc/models" -name '*.inp' -o -name '*.out' | xargs -r rm -f
tar -czf "$out/llama-cpp-python-src.tgz" -C "$tmp" "$(basename "$src")"

# pure-Python packages the GPU machine's image does not have (the GPU tests' reference needs gguf)
python3 -m pip download -q --no-deps -d "$out/wheels" gguf diskcache
du -sh "$out"/* | sed 's/^/bundle: /'

# .whl/: what `hearth serve` and the tests' conftest import there, as wheels for the device's
# Python (3.12, x86_64), dependencies included; the device scripts install them with
# `pip install --no-index --no-deps --target /tmp/site .whl/*.whl` (.whl alone: pip refuses a
# wheel named twice on one line). Two imports are not declared where pip would follow them:
# fastapi 0.165 imports opentelemetry, and importlib_metadata lazy_importer.
whl=${WHEELS_OUT:-.whl}
mkdir -p "$whl"
python3 -m pip download -q --only-binary :all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$whl" \
  fastapi uvicorn sse-starlette keyring opentelemetry-api lazy-importer pygments markdown-it-py
# keyring's Secret Service backend (cryptography: 4 MB) is not used there (the tests' keyring is
# tests/keyring_stand_in.py), and the carried tree's limit is 64 MiB with .llama-pack beside it
rm -f "$whl"/cryptography-*.whl "$whl"/cffi-*.whl "$whl"/pycparser-*.whl "$whl"/secretstorage-*.whl
# and the bundle's two, so that a call carrying .llama-pack and .whl (not .gpu-bundle) has them
cp "$out"/wheels/gguf-*.whl "$out"/wheels/diskcache-*.whl "$whl"/
du -sh "$whl" | sed 's/^/server and test wheels: /'
