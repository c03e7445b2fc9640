"""The Hearth engine's kernel compilation, said before a load pays for it.

Triton compiles each kernel the first time it runs with a new specialization (block formats,
head sizes, the KV format) and keeps the binary in its disk cache. The first Hearth load of a
model shape after an install therefore compiles the decode and prefill kernels inside the
load's warm-up (HearthContext.warm_up): 10.3 s on the H200 for the 8B-shaped Q4_K_M, against
0.8 s when Triton's cache has them (docs/measurements/2026-11-28-h35l-load-h200.txt).

This module keeps, in the data directory, the warm-ups that ran per key (the install: torch,
Triton and kernels/ sources; the GPU; the model's shape and KV pair) and how long each took. A
warm-up with no record for its key prints one line before it starts, with the estimate: the
slowest warm-up recorded on this GPU, or the H200's figure when there is none. A record can
outlive Triton's cache (the person cleared it): the load then compiles without the line, as
before.

    record = CompileRecord.default()
    key = compile_key(gpu_name, shape)
    line = record.notice(key, gpu_name)   # None: compiled before; else the line to print
    record.note(key, gpu_name, seconds)   # after the warm-up
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from engine.paths import data_dir

RECORD_NAME = "hearth-kernel-compiles.json"
H200_FIRST_WARM_UP_S = 10.3  # the measured first load's cache + first token, before any record
_KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"


def kernels_digest(directory: Path = _KERNELS_DIR) -> str:
    """A digest of kernels/'s sources: an edited kernel compiles again."""
    digest = hashlib.sha256()
    for path in sorted(directory.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def compile_key(gpu: str, shape: str) -> str:
    versions = []
    for name in ("torch", "triton"):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} none")
    return " | ".join([*versions, f"kernels {kernels_digest()}", gpu, shape])


class CompileRecord:
    """{key: {"gpu": name, "seconds": warm-up}} in one JSON file (a read-only home: nothing
    is kept and each first load says so again)."""

    def __init__(self, path: Path):
        self._path = path

    @classmethod
    def default(cls) -> CompileRecord:
        return cls(data_dir() / RECORD_NAME)

    def _read(self) -> dict:
        try:
            known = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return known if isinstance(known, dict) else {}

    def notice(self, key: str, gpu: str) -> str | None:
        """None when a warm-up with this key ran before; else the line that says the kernels
        are about to compile, and for about how long."""
        known = self._read()
        if key in known:
            return None
        on_this_gpu = [
            float(v["seconds"])
            for v in known.values()
            if isinstance(v, dict) and v.get("gpu") == gpu
        ]
        if on_this_gpu:
            estimate = f"about {max(on_this_gpu):.0f} s (the slowest such load on this GPU)"
        else:
            estimate = f"about {H200_FIRST_WARM_UP_S:.0f} s on an H200"
        return (
            f"hearth worker: first Hearth load of this model shape on {gpu} with this install: "
            f"compiling its GPU kernels, {estimate}; later loads reuse them"
        )

    def note(self, key: str, gpu: str, seconds: float) -> None:
        known = self._read()
        known[key] = {"gpu": gpu, "seconds": round(seconds, 2)}
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self._path.with_suffix(".tmp")
            temporary.write_text(json.dumps(known, indent=1), encoding="utf-8")
            os.replace(temporary, self._path)
        except OSError:
            pass


def announced_warm_up(
    record: CompileRecord,
    key: str,
    gpu: str,
    warm_up: Callable[[], None],
    log: Callable[[str], None],
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Run `warm_up`; the first time for `key`, say first that it compiles the kernels, and
    keep how long it took (the estimate for the next new shape on this GPU)."""
    line = record.notice(key, gpu)
    if line is None:
        warm_up()
        return
    log(line)
    started = clock()
    warm_up()
    record.note(key, gpu, clock() - started)
