#!/usr/bin/env bash
# `make test-vulkan`: build the Vulkan variant of the engine into .venv-vulkan and check it on
# Mesa's software Vulkan device (lavapipe) against the CPU build in .venv.
# Needs (Debian): glslc libvulkan-dev spirv-headers mesa-vulkan-drivers.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\).*/\1/p' /usr/include/vulkan/vulkan_core.h 2>/dev/null || true)
if [ -z "$version" ] || [ "$version" -lt 261 ]; then
  eval "$(installers/vulkan_headers.sh)"  # Debian 12's headers are too old for ggml-vulkan
fi
HEARTH_VENV=.venv-vulkan HEARTH_BACKEND=vulkan installers/setup_env.sh test
# llama.cpp leaves CPU-type Vulkan devices (lavapipe) out unless they are named.
GGML_VK_VISIBLE_DEVICES=0 HEARTH_CPU_PYTHON=.venv/bin/python \
  .venv-vulkan/bin/python -m pytest -v -rP -p no:cacheprovider benchmarks/backends/test_vulkan.py
