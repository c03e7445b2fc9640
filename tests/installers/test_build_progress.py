"""The engine build shows its progress (from Ninja's [n/total] through pip -v), not pip's
"still running...", and its last lines when it fails."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "installers"))

from build_progress import fraction_done, phase_of, run_with_progress


@pytest.mark.parametrize(
    "line, fraction",
    [
        ("[37/200] Building CXX object vendor/llama.cpp/src/llama.cpp.o", 37 / 200),
        ("  [200/200] Linking CXX shared library bin/libllama.so", 1.0),
        ("[ 42%] Building C object ggml/src/ggml.c.o", 0.42),
        ("*** Configuring CMake...", None),
        ("loading initial cache file /tmp/x", None),
        ("[0/0] nothing", None),
    ],
)
def test_how_far_a_line_says_the_build_is(line, fraction):
    assert fraction_done(line) == fraction


def test_phases_are_named():
    assert phase_of("*** Configuring CMake...") == "configuring llama.cpp (CMake)"
    assert phase_of("*** Building project with Ninja...") == "compiling llama.cpp"
    assert phase_of("-- Found Threads: TRUE") is None


def _fake_build(lines: list[str], status: int = 0) -> list[str]:
    script = "import sys\n" + "".join(f"print({line!r})\n" for line in lines)
    return [sys.executable, "-c", script + f"sys.exit({status})"]


def test_a_build_prints_a_line_per_step_and_the_phases():
    lines = ["*** Configuring CMake...", "-- The C compiler is GNU 12"]
    lines += ["*** Building project with Ninja..."]
    lines += [f"[{i}/100] Building C object x{i}.o" for i in range(1, 101)]
    out = io.StringIO()
    assert run_with_progress(_fake_build(lines), out=out) == 0
    printed = out.getvalue().splitlines()
    assert printed[:2] == ["hearth: configuring llama.cpp (CMake)…", "hearth: compiling llama.cpp…"]
    percents = [int(line.split()[-2].rstrip("%")) for line in printed[2:]]
    assert percents == [*range(1, 101, 5), 100]  # every 5 %, and the end
    assert "-- The C compiler" not in out.getvalue()  # the build's chatter stays out


def test_a_failed_build_shows_its_last_lines():
    lines = [f"line {i}" for i in range(100)] + ["error: nvcc not found"]
    out = io.StringIO()
    assert run_with_progress(_fake_build(lines, status=1), out=out) == 1
    text = out.getvalue()
    assert "the engine build failed; its last lines:" in text
    assert "  | error: nvcc not found" in text and "  | line 61" in text
    assert "  | line 59" not in text  # 40 lines, not the whole log
