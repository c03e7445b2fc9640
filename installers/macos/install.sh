#!/usr/bin/env bash
# macOS: the same environment as `make run`, with llama.cpp built for Metal on Apple silicon
# (CPU on Intel Macs). Needs the Xcode command line tools (xcode-select --install), CMake
# (brew install cmake) and Python 3.11+ (brew install python@3.12).
# Not yet run on a Mac by the project: see docs/backends.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! xcode-select -p >/dev/null 2>&1; then
  echo "Install the Xcode command line tools first: xcode-select --install" >&2
  exit 1
fi
if ! command -v cmake >/dev/null; then
  echo "Install CMake first (brew install cmake)." >&2
  exit 1
fi
if [ "$(uname -m)" = "arm64" ]; then
  export HEARTH_BACKEND=${HEARTH_BACKEND:-metal}
else
  export HEARTH_BACKEND=${HEARTH_BACKEND:-cpu}
fi
PYTHON=${PYTHON:-python3} installers/setup_env.sh
echo "Start Hearth with: .venv/bin/hearth"
