#!/usr/bin/env bash
# Unpack what benchmarks/make_gui_carry.sh packed into /tmp/gui-site (GUI_SITE overrides it),
# check that an offscreen QApplication starts, and print the environment that uses it:
#
#   eval "$(bash benchmarks/gui_carry_install.sh .gui-carry)"
#
# The carried system libraries are used only for what this machine lacks (GUI_CARRY_ALL_LIBS=1
# uses all of them, to test the carry on the machine that made it). Fonts are the carried ones
# alone, so text is laid out alike everywhere. Messages go to stderr; stdout is the exports.
set -euo pipefail
src=${1:-.gui-carry}
root=${GUI_SITE:-/tmp/gui-site}
python=${PYTHON:-python3}
case "$root" in /tmp/?*) ;; *) [ -f "$root/fonts.conf" ] || [ ! -e "$root" ] || {
  echo "gui carry: $root exists and is not an earlier gui-site; choose another GUI_SITE" >&2
  exit 1; } ;; esac
rm -rf "$root"
mkdir -p "$root/lib" "$root/fontconfig-cache"
tar -xJf "$src/gui-site.tar.xz" -C "$root"
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$root/site" \
  "$src"/wheels/*.whl >&2

# Link a carried library for each one the loader cannot find, until nothing is missing (a
# carried library may need others in turn).
elfs=$(find "$root/site" -name '*.so*' -type f)
if [ "${GUI_CARRY_ALL_LIBS:-0}" = 1 ]; then
  ln -sf "$root"/syslibs/* "$root/lib/"
fi
for _ in 1 2 3 4 5 6 7 8; do
  missing=$(LD_LIBRARY_PATH="$root/lib" ldd $elfs 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
  [ -z "$missing" ] && break
  for name in $missing; do
    if [ ! -e "$root/syslibs/$name" ]; then
      echo "gui carry: $name is missing here and was not carried" >&2
      exit 1
    fi
    ln -sf "$root/syslibs/$name" "$root/lib/$name"
  done
done
echo "gui carry: system libraries used from the carry: $(ls "$root/lib" | tr '\n' ' ')" >&2

cat >"$root/fonts.conf" <<EOF
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <dir>$root/fonts</dir>
  <cachedir>$root/fontconfig-cache</cachedir>
  <alias><family>sans-serif</family><prefer><family>DejaVu Sans</family></prefer></alias>
  <alias><family>monospace</family><prefer><family>DejaVu Sans Mono</family></prefer></alias>
</fontconfig>
EOF

exports="export PYTHONPATH=$root/site\${PYTHONPATH:+:\$PYTHONPATH}
export LD_LIBRARY_PATH=$root/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export QT_QPA_PLATFORM=offscreen
export FONTCONFIG_FILE=$root/fonts.conf"
(
  eval "$exports"
  "$python" -c '
from PySide6.QtCore import qVersion
from PySide6.QtGui import QFontDatabase, QFontInfo
from PySide6.QtWidgets import QApplication
import markdown_it, pygments
app = QApplication([])
print(f"gui carry: Qt {qVersion()} ({app.platformName()}), font {QFontInfo(app.font()).family()}, "
      f"{len(QFontDatabase.families())} font families")
' >&2
)
echo "$exports"
