"""The launcher's check of the system libraries Qt's X11 plugin needs: what ldd cannot find, and
the one command that installs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app import qt_libs as check

# ldd on PySide6 6.11's libqxcb.so on a minimal Debian 12 (this project's machine), shortened
LDD = """\
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f5633e8e000)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f5633da4000)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-randr.so.0 => /lib/x86_64-linux-gnu/libxcb-randr.so.0 (0x00007f5633d83000)
\tlibxcb-icccm.so.4 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f5633f5e000)
"""
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
UBUNTU = "ID=ubuntu\nID_LIKE=debian\n"
FEDORA = 'ID=fedora\nVERSION_ID="40"\n'


def test_what_ldd_cannot_find_is_missing_once_each():
    assert check.missing_libraries(LDD) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert check.missing_libraries(LDD.replace("not found", "/lib/x.so (0x1)")) == []


@pytest.mark.parametrize(
    "os_release, family", [(DEBIAN, "debian"), (UBUNTU, "debian"), (FEDORA, "fedora"), ("", None)]
)
def test_the_distribution_family(os_release, family):
    assert check.distro_family(os_release) == family


def test_one_command_installs_what_is_missing(monkeypatch):
    monkeypatch.setattr(check.os, "geteuid", lambda: 1000)
    missing = ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-cursor.so.0"]
    assert check.install_command(missing, "debian") == (
        "sudo apt-get install libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0"
    )
    assert check.install_command(missing, "fedora") == (
        "sudo dnf install xcb-util-wm xcb-util-keysyms xcb-util-cursor"
    )
    monkeypatch.setattr(check.os, "geteuid", lambda: 0)
    assert check.install_command(missing[:1], "debian") == "apt-get install libxcb-icccm4"
    assert check.install_command(["libunknown.so.1"], "debian") is None
    assert check.install_command(missing, None) is None


def test_every_xcb_library_of_the_plugin_has_a_package():
    names = ["cursor", "icccm", "keysyms", "image", "util", "render-util", "randr", "shm"]
    for name in names:
        assert any(soname.startswith(f"libxcb-{name}.so") for soname in check.PACKAGES), name


@pytest.fixture(autouse=True)
def linux_with_ldd(monkeypatch):
    monkeypatch.setattr(check.sys, "platform", "linux")
    monkeypatch.setattr(check.shutil, "which", lambda name: f"/usr/bin/{name}")


def test_main_reports_and_fails_when_libraries_are_missing(monkeypatch, capsys):
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    monkeypatch.setattr(check, "xcb_plugin", lambda: "/venv/libqxcb.so")

    def fake_ldd(cmd, **_kwargs):
        assert cmd == ["ldd", "/venv/libqxcb.so"]
        return subprocess.CompletedProcess(cmd, 0, stdout=LDD, stderr="")

    assert check.main(run=fake_ldd) == 1
    err = capsys.readouterr().err
    assert "libxcb-icccm.so.4" in err and "libxcb-keysyms.so.1" in err
    assert "Install them with:" in err or "Install the packages" in err


def test_main_is_quiet_when_all_is_there_or_another_platform_is_chosen(monkeypatch, capsys):
    monkeypatch.setattr(check, "xcb_plugin", lambda: "/venv/libqxcb.so")
    fine = LDD.replace("not found", "/lib/x.so (0x1)")

    def fake_ldd(cmd, **_kwargs):
        return subprocess.CompletedProcess(cmd, 0, stdout=fine, stderr="")

    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    assert check.main(run=fake_ldd) == 0
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert check.main(run=lambda *a, **k: pytest.fail("ldd run for offscreen")) == 0
    assert capsys.readouterr().err == ""


def test_the_readme_lists_every_x11_library_the_check_knows():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    command = readme[readme.index("apt-get install libxcb") :].split("```")[0]
    assert "sudo apt-get install libxcb" not in readme  # a container has no sudo: "as root"
    words = set(command.replace("\\", " ").split())
    x11 = {debian for soname, (debian, _f, _a) in check.PACKAGES.items() if "xcb" in soname}
    assert x11 <= words, sorted(x11 - words)
    assert "nvcc" in readme and "hipcc" in readme and "glslc" in readme


def test_the_launcher_checks_before_it_imports_qt(monkeypatch):
    """`hearth` started directly (not only `make run`): the check comes before the window."""
    import app.launcher

    monkeypatch.setattr(check, "main", lambda *a, **k: 1)
    monkeypatch.setattr(
        "app.shell.gui_main.run_gui", lambda *_: pytest.fail("the window opened without Qt")
    )
    assert app.launcher.main([]) == 1
