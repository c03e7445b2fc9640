"""kernels/compiler_warmup.py: Triton's once-per-process setup done ahead of a first kernel."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from triton.runtime.cache import triton_key

from kernels import compiler_warmup


def test_the_warm_up_leaves_tritons_cache_key_computed():
    """What the first compile would hash is then cached: its call returns without hashing."""
    triton_key.cache_clear()
    compiler_warmup.warm_compiler()
    assert triton_key.cache_info().currsize == 1
    hits = triton_key.cache_info().hits
    triton_key()
    assert triton_key.cache_info().hits == hits + 1


def test_the_background_warm_up_starts_once(monkeypatch):
    calls = []
    monkeypatch.setattr(compiler_warmup, "_started", None)
    monkeypatch.setattr(compiler_warmup, "warm_compiler", lambda: calls.append(1))
    first = compiler_warmup.warm_compiler_in_background()
    assert compiler_warmup.warm_compiler_in_background() is first
    first.join(timeout=10)
    assert calls == [1]


def test_a_failing_warm_up_is_left_to_the_first_compile(monkeypatch):
    def fails():
        raise RuntimeError("no libtriton here")

    monkeypatch.setattr(compiler_warmup, "_started", None)
    monkeypatch.setattr(compiler_warmup, "warm_compiler", fails)
    thread = compiler_warmup.warm_compiler_in_background()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_waiting_returns_once_the_warm_up_has_ended(monkeypatch):
    import threading

    release, ended, seen = threading.Event(), [], []

    def slow():
        release.wait(timeout=10)
        ended.append(1)

    def waiter():
        compiler_warmup.wait_for_warmup()
        seen.append(list(ended))  # what had ended when the wait returned

    monkeypatch.setattr(compiler_warmup, "_started", None)
    compiler_warmup.wait_for_warmup()  # none started: returns at once
    monkeypatch.setattr(compiler_warmup, "warm_compiler", slow)
    compiler_warmup.warm_compiler_in_background()
    thread = threading.Thread(target=waiter)
    thread.start()
    release.set()
    thread.join(timeout=10)
    assert seen == [[1]]


def test_a_module_that_fails_to_import_is_skipped(monkeypatch):
    """The NVIDIA backend's modules on another vendor's GPU, say: the rest still imported."""
    imported = []

    def fake_import(name):
        if name == "bad.backend":
            raise RuntimeError("no CUDA driver here")
        imported.append(name)

    monkeypatch.setattr(compiler_warmup, "MODULES", ("bad.backend", "good.module"))
    monkeypatch.setattr(compiler_warmup.importlib, "import_module", fake_import)
    compiler_warmup.warm_compiler()
    assert imported == ["good.module"]
