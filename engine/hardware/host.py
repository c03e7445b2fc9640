"""The machine as the probes see it: file system root, OS, commands, driver libraries.

Every probe reaches the machine only through a `Host`, so tests hand the probes a fake sysfs tree,
recorded command output or a test double for NVML, and the real machine is never touched.
"""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CommandOutput:
    returncode: int | None  # None: it did not run (not installed, timed out)
    stdout: str = ""
    stderr: str = ""
    problem: str = ""  # why it did not run, in words


def run_command(argv: list[str], timeout_s: float) -> CommandOutput:
    """Run a short informational command; never raises, kills it after `timeout_s`."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=max(timeout_s, 0.05),
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return CommandOutput(None, problem=f"{argv[0]} is not installed")
    except subprocess.TimeoutExpired:
        return CommandOutput(None, problem=f"{argv[0]} did not answer within {timeout_s:.1f} s")
    except OSError as exc:
        return CommandOutput(None, problem=f"{argv[0]} could not run: {exc.strerror or exc}")
    return CommandOutput(done.returncode, done.stdout, done.stderr)


def read_text(path: Path) -> str:
    return path.read_text(errors="replace")


def _import_pynvml() -> Any:
    # The one place that imports NVML's bindings; tests pass `Host(nvml=double)` instead, or put
    # a double in sys.modules["pynvml"].
    import pynvml

    return pynvml


def _import_amdsmi() -> Any:
    import amdsmi

    return amdsmi


def _import_psutil() -> Any:
    import psutil

    return psutil


@dataclass(frozen=True)
class Host:
    root: Path = Path("/")
    system: str = field(default_factory=platform.system)  # Linux, Darwin, Windows
    machine: str = field(default_factory=platform.machine)  # x86_64, arm64, aarch64
    kernel: str = field(default_factory=platform.release)
    run: Callable[[list[str], float], CommandOutput] = run_command
    read: Callable[[Path], str] = read_text
    load_nvml: Callable[[], Any] = _import_pynvml
    load_amdsmi: Callable[[], Any] = _import_amdsmi
    load_psutil: Callable[[], Any] = _import_psutil
    clock: Callable[[], float] = time.monotonic

    def path(self, absolute: str) -> Path:
        """`/sys/class/drm` under this host's root."""
        return self.root / absolute.lstrip("/")

    def read_value(self, path: Path) -> str:
        """A sysfs or procfs value, stripped. Raises OSError (missing, unreadable, a folder)."""
        return self.read(path).strip()


@dataclass(frozen=True)
class Deadline:
    """The time left to a probe; subprocess timeouts are cut to fit it."""

    host: Host
    at: float

    @classmethod
    def after(cls, host: Host, seconds: float) -> Deadline:
        return cls(host, host.clock() + seconds)

    def left(self, cap: float | None = None) -> float:
        remaining = max(self.at - self.host.clock(), 0.0)
        return remaining if cap is None else min(remaining, cap)
