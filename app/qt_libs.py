"""Before the window opens (`hearth`, `make run`): are the system libraries Qt's X11 (xcb)
platform plugin needs installed? If not, say which are missing and print the one command that
installs them. The launcher asks before it imports Qt, which would abort with only "Could not
load the Qt platform plugin "xcb"".

PySide6's wheels bring Qt but not the X11 client libraries. Without them the window does not
open and Qt says only "Could not load the Qt platform plugin "xcb"". The list is what
`ldd` reports for PySide6 6.11's libqxcb.so (which pulls in libQt6XcbQpa): ldd follows the whole
chain, so what it calls "not found" is exactly what is missing.

Exit status 0 when everything is there (or nothing can be checked: not Linux, no ldd, no
PySide6 yet, another Qt platform chosen), 1 when libraries are missing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

# soname -> package, per distribution family (Debian/Ubuntu, Fedora/RHEL, Arch)
PACKAGES: dict[str, tuple[str, str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util"),
    "libxcb-render-util.so.0": (
        "libxcb-render-util0",
        "xcb-util-renderutil",
        "xcb-util-renderutil",
    ),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11"),
    "libXau.so.6": ("libxau6", "libXau", "libxau"),
    "libXdmcp.so.6": ("libxdmcp6", "libXdmcp", "libxdmcp"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype", "freetype2"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus"),
}
INSTALLERS = {
    "debian": "sudo apt-get install",
    "fedora": "sudo dnf install",
    "arch": "sudo pacman -S",
}
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")


def xcb_plugin() -> Path | None:
    """PySide6's libqxcb.so, found without importing PySide6 (that could be what fails)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        plugin = Path(folder) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.is_file():
            return plugin
    return None


def missing_libraries(ldd_output: str) -> list[str]:
    """The sonames ldd could not find, each once, in ldd's order."""
    found = (m.group(1) for line in ldd_output.splitlines() if (m := _NOT_FOUND.match(line)))
    return list(dict.fromkeys(found))


def distro_family(os_release: str) -> str | None:
    """ "debian", "fedora" or "arch" from /etc/os-release's ID and ID_LIKE, else None."""
    ids: list[str] = []
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids += value.strip().strip('"').split()
    for family, members in {
        "debian": {"debian", "ubuntu", "linuxmint", "pop"},
        "fedora": {"fedora", "rhel", "centos", "rocky", "almalinux"},
        "arch": {"arch", "manjaro", "endeavouros"},
    }.items():
        if members & set(ids):
            return family
    return None


def install_command(missing: list[str], family: str | None) -> str | None:
    """The one command that installs what is missing, or None when it cannot be named."""
    if family is None or any(name not in PACKAGES for name in missing):
        return None
    column = list(INSTALLERS).index(family)
    packages = dict.fromkeys(PACKAGES[name][column] for name in missing)
    command = INSTALLERS[family]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command = command.removeprefix("sudo ")  # root (a container) has no sudo to ask
    return f"{command} {' '.join(packages)}"


def report(missing: list[str], family: str | None) -> str:
    lines = [
        "hearth: the window cannot open: Qt's X11 plugin needs system libraries that are not "
        "installed:",
        *(f"  {name}" for name in missing),
    ]
    command = install_command(missing, family)
    if command:
        lines += ["Install them with:", f"  {command}", "then start Hearth again."]
    else:
        lines += [
            "Install the packages that provide them (your distribution's package search finds "
            "them by file name), then start Hearth again."
        ]
    return "\n".join(lines)


def main(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> int:
    if not sys.platform.startswith("linux") or shutil.which("ldd") is None:
        return 0
    if os.environ.get("QT_QPA_PLATFORM", "xcb").split(":")[0] not in ("", "xcb"):
        return 0  # another platform plugin was chosen (offscreen, wayland)
    plugin = xcb_plugin()
    if plugin is None:
        return 0
    done = run(["ldd", str(plugin)], capture_output=True, text=True, check=False)
    missing = missing_libraries(done.stdout)
    if not missing:
        return 0
    try:
        os_release = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        os_release = ""
    print(report(missing, distro_family(os_release)), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
