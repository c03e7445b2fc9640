"""A llama.cpp build without its multimodal library (libmtmd: installers/build_engine.py can
leave it out, and the GPU machines' build does): the worker still starts and runs text models,
and only opening a vision projector fails, saying why. Run in a child process whose import of
llama_cpp.mtmd_cpp fails as llama-cpp-python's loader does (FileNotFoundError)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python")

CHILD = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoMtmd(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "llama_cpp.mtmd_cpp":
                raise FileNotFoundError("Shared library with base name 'mtmd' not found")
            return None

    sys.meta_path.insert(0, NoMtmd())
    import engine.runtime.engine_state  # the worker's engine: llama.cpp's bindings and all
    from engine.llama.driver import EngineError
    from engine.runtime import llama_engine

    try:
        llama_engine._vision()
    except EngineError as exc:
        print("refused:", exc)
    """
)


def test_the_worker_imports_and_only_vision_is_refused():
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: This llama.cpp build has no multimodal library (mtmd)" in done.stdout
    assert "reinstall the engine" in done.stdout
