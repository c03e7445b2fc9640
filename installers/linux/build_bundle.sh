#!/usr/bin/env bash
# Build the one-folder Linux bundle into dist/hearth (with its .desktop entry and icon) from the
# environment `make run` made, and check that it answers a prompt with the starter model.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${HEARTH_VENV:-.venv}
[ -x "$venv/bin/python" ] || installers/setup_env.sh
"$venv/bin/python" -m pip install -q --disable-pip-version-check "pyinstaller>=6.10"
"$venv/bin/pyinstaller" --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller \
  installers/linux/hearth.spec
cp installers/linux/hearth.desktop assets/hearth.svg dist/hearth/
echo "bundle: dist/hearth (run dist/hearth/hearth; install the .desktop file to add it to menus)"
dist/hearth/hearth chat --prompt "Say hello." --temp 0 --max-tokens 16
