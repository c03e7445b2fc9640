#!/usr/bin/env bash
# Pack what an offline GPU machine (Python 3.12 x86-64, no PySide6, no network) needs to run
# the GUI benchmark, benchmarks/gui_decode.py, in well under 30 MiB:
#   DEST/gui-site.tar.xz  a trimmed PySide6 (QtCore, QtGui, QtWidgets, the offscreen platform
#                         plugin, ICU), shiboken6, the system libraries they link (the GPU
#                         machine's own are preferred where it has them), and fonts;
#   DEST/wheels/*.whl     the chat's pure-Python dependencies: markdown-it-py, mdurl, Pygments.
# PySide6's modules are abi3, so the cp312 wheels are the same files any Python >= 3.10 uses.
#
# Run it here, on a Debian/Ubuntu x86-64 machine that reaches PyPI and has Qt's system libraries
# (libgl1, libegl1, libfontconfig1, libxkbcommon0, libdbus-1-3, ...) and fonts-dejavu-core.
# On the GPU machine: eval "$(bash benchmarks/gui_carry_install.sh DEST)".
#
# Usage: benchmarks/make_gui_carry.sh [DEST]     (default .gui-carry, ignored by git)
set -euo pipefail
dest=${1:-.gui-carry}
pyside=6.11.3  # pyproject.toml: PySide6-Essentials < 6.12
pure=(markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0)
fonts=/usr/share/fonts/truetype/dejavu
font_files=(DejaVuSans.ttf DejaVuSans-Bold.ttf DejaVuSansMono.ttf)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$dest/wheels" "$dest/gui-site.tar.xz"
mkdir -p "$dest/wheels" "$tmp/site" "$tmp/syslibs" "$tmp/fonts"

fetch() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_34_x86_64 -d "$@"
}
fetch "$tmp/whl" "PySide6-Essentials==$pyside" "shiboken6==$pyside"
fetch "$dest/wheels" "${pure[@]}"

# Only what `import PySide6.QtWidgets` and an offscreen QApplication load.
python3 - "$tmp/site" "$tmp"/whl/*.whl <<'EOF'
import re, sys, zipfile
keep = re.compile(
    r"shiboken6/(__init__|_config|_git_shiboken_module_version)\.py|shiboken6/[^/]*\.so[.0-9]*"
    r"|PySide6/(__init__|_config|_git_pyside_version)\.py|PySide6/libpyside6\.abi3\.so[.0-9]*"
    r"|PySide6/Qt(Core|Gui|Widgets)\.abi3\.so"
    r"|PySide6/Qt/lib/lib(Qt6(Core|Gui|Widgets|DBus)|icu(data|i18n|uc))\.so[.0-9]*"
    r"|PySide6/Qt/plugins/platforms/libqoffscreen\.so"
)
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if keep.fullmatch(info.filename):
                z.extract(info, sys.argv[1])
                # zipfile drops the mode bits; shared libraries must stay executable.
                path = f"{sys.argv[1]}/{info.filename}"
                __import__("os").chmod(path, (info.external_attr >> 16) or 0o755)
EOF

# The system libraries they link, except glibc's and the C++ runtime (the GPU machine's own,
# newer, must be used), copied under their sonames.
elfs=$(find "$tmp/site" -name '*.so*' -type f)
if ldd $elfs | grep -q "not found"; then
  echo "Qt's system libraries are missing here:" >&2
  ldd $elfs | grep "not found" | sort -u >&2
  exit 1
fi
ldd $elfs | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*) continue ;;
      libstdc++.so*|libgcc_s.so*|libQt6*|libicu*|libpyside6*|libshiboken6*) continue ;;
    esac
    cp -L "$path" "$tmp/syslibs/$name"
  done

for f in "${font_files[@]}"; do cp "$fonts/$f" "$tmp/fonts/"; done
tar -cJf "$dest/gui-site.tar.xz" -C "$tmp" site syslibs fonts
du -csh "$dest/gui-site.tar.xz" "$dest/wheels" | sed "s/^/gui carry: /"
