#!/usr/bin/env bash
# Debian 12's Vulkan headers (1.3.239) are older than the engine's Vulkan backend needs (it uses
# VK_EXT_layer_settings, in the headers since 1.3.261). Fetch Debian 13's header packages
# (headers only: nothing is installed system-wide) into a folder and print the CMake flags that
# point the build at them.
#
# Usage: eval "$(installers/vulkan_headers.sh)"   -> sets HEARTH_VULKAN_CMAKE_ARGS, VULKAN_SDK
set -euo pipefail
dest=${HEARTH_VULKAN_HEADERS:-$HOME/.cache/hearth/vulkan-headers}
if [ ! -f "$dest/usr/include/vulkan/vulkan_core.h" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    >"$work/sources.list"
  apt_opts=(-oDir::Etc::SourceList="$work/sources.list" -oDir::Etc::SourceParts=/dev/null
    -oDir::State::Lists="$work/lists" -oDir::Cache="$work/cache")
  apt-get "${apt_opts[@]}" update -qq >&2
  (cd "$work" && apt-get "${apt_opts[@]}" download libvulkan-dev spirv-headers >&2)
  mkdir -p "$dest"
  for deb in "$work"/*.deb; do dpkg -x "$deb" "$dest"; done
fi
echo "export VULKAN_SDK='$dest/usr'"
echo "export HEARTH_VULKAN_CMAKE_ARGS='-DVulkan_INCLUDE_DIR=$dest/usr/include -DCMAKE_PREFIX_PATH=$dest/usr'"
