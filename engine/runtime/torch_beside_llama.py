"""Whether torch can be imported into a process that has already loaded llama.cpp.

The worker loads llama.cpp first (its tokenizer serves both engines, and the llama.cpp engine
itself), and a Hearth load imports torch after it. A llama.cpp build whose libraries carry
their own static copy of the C++ runtime makes that import end the process (`free(): invalid
pointer` inside torch's TorchScript source parser: torch's std::stringstream reaching the
build's std::locale), and no import order is safe with it (numpy or torch first crashes the
CUDA model load instead; docs/hearth-engine.md). Built against the shared libstdc++, both
load in any order.

So before the first Hearth load the worker asks a child process to do exactly that (load
llama.cpp's library, then import torch). A child that dies means the Hearth engine would take
the worker down: the load falls back to llama.cpp with the reason instead. The answer is kept
per Python, llama-cpp-python and torch version, so the child runs once per install (about two
seconds).

    problem = torch_import_problem()     # None, or a one-line reason
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata

from engine.paths import data_dir

PROBE = "import llama_cpp.llama_cpp\nimport torch\nimport torch.nn.functional\nprint('ok')\n"
TIMEOUT_S = 180
_CACHE_NAME = "torch-beside-llama.json"


def torch_import_problem(probe: str = PROBE) -> str | None:
    """None when torch imports fine after llama.cpp's library in one process (or torch is in
    this process already); else why the Hearth engine must not be loaded here."""
    if "torch" in sys.modules:
        return None
    key = _install_key()
    known = _read_cache()
    if key in known:
        return known[key]
    problem = _run_probe(probe)
    if problem is None or not problem.startswith("could not check"):
        known[key] = problem
        _write_cache(known)
    return problem


def _run_probe(probe: str) -> str | None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"could not check that torch and llama.cpp load in one process ({exc})"
    if done.returncode == 0 and done.stdout.strip().endswith("ok"):
        return None
    last = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
    return (
        f"torch cannot be imported after this llama.cpp build in one process (a test process "
        f"ended with status {done.returncode}: {last}). Seen with llama.cpp builds that link "
        f"the C++ runtime statically: rebuild llama-cpp-python against the shared libstdc++ "
        f"(docs/hearth-engine.md, Not done)"
    )


def _install_key() -> str:
    versions = []
    for name in ("llama_cpp_python", "torch"):
        try:
            versions.append(metadata.version(name))
        except metadata.PackageNotFoundError:
            versions.append("none")
    return " ".join([sys.executable, *versions])


def _cache_path():
    return data_dir() / _CACHE_NAME


def _read_cache() -> dict:
    try:
        return json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_cache(known: dict) -> None:
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(known, indent=1), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home: the check runs again next time
