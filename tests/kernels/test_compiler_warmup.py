"""kernels/compiler_warmup.py: Triton's once-per-process setup done ahead of a first kernel."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("triton")

import triton.runtime.cache as triton_cache

from kernels import compiler_warmup


@pytest.fixture
def counted_hash(monkeypatch, tmp_path):
    """Triton's triton_key replaced by one counting its calls (restored after the test), and
    Triton's cache folder a fresh one."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def hashed():
        calls.append(1)
        return f"key-{len(calls)}"

    monkeypatch.setattr(triton_cache, "triton_key", hashed)
    return calls


def test_the_warm_up_leaves_tritons_cache_key_computed(counted_hash):
    """What the first compile would ask for is then at hand: Triton's own triton_key answers
    without hashing again."""
    compiler_warmup.warm_compiler()
    assert counted_hash == [1]
    assert triton_cache.triton_key() == "key-1"
    assert counted_hash == [1]


def test_a_later_process_takes_the_kept_key_without_hashing(counted_hash, monkeypatch):
    first = compiler_warmup.use_kept_key()
    # a new process: Triton's hashing function again, the folder as the first one left it
    monkeypatch.setattr(triton_cache, "triton_key", lambda: counted_hash.append(1) or "other")
    assert compiler_warmup.use_kept_key() == first == "key-1"
    assert counted_hash == [1]


def test_a_changed_installation_is_hashed_again(counted_hash, monkeypatch):
    compiler_warmup.use_kept_key()
    monkeypatch.setattr(compiler_warmup, "installation_stamp", lambda root: "reinstalled")
    monkeypatch.setattr(triton_cache, "triton_key", lambda: counted_hash.append(1) or "new")
    assert compiler_warmup.use_kept_key() == "new"
    assert counted_hash == [1, 1]
    monkeypatch.setattr(triton_cache, "triton_key", lambda: pytest.fail("hashed a third time"))
    assert compiler_warmup.use_kept_key() == "new"  # kept for the changed installation


@pytest.mark.parametrize("text", ["", "{not json", '["a list"]', '{"stamp": 1, "key": "k"}'])
def test_a_damaged_key_file_is_hashed_over(counted_hash, tmp_path, text):
    kept = tmp_path / "cache" / compiler_warmup.KEY_FILE
    kept.parent.mkdir()
    kept.write_text(text)
    assert compiler_warmup.use_kept_key() == "key-1"
    assert counted_hash == [1]
    assert "key-1" in kept.read_text()


def test_a_folder_that_cannot_be_written_still_gives_the_key(monkeypatch, tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(triton_cache, "triton_key", lambda: "hashed")
    assert compiler_warmup.use_kept_key() == "hashed"
    assert list(tmp_path.iterdir()) == [blocker]


def test_the_stamp_changes_with_any_hashed_file(tmp_path):
    root = tmp_path / "triton"
    for name in ("runtime/cache.py", "_C/libtriton.so", "compiler/a.py", "language/b.py",
                 "backends/nvidia/c.so", "backends/nvidia/ptxas"):  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    before = compiler_warmup.installation_stamp(root)
    assert compiler_warmup.installation_stamp(root) == before
    (root / "backends/nvidia/ptxas").write_text("not hashed by Triton either")
    assert compiler_warmup.installation_stamp(root) == before
    (root / "language/b.py").write_text("xy")
    assert compiler_warmup.installation_stamp(root) != before


def test_the_kept_key_is_tritons_own(tmp_path):
    """On this machine's Triton, in fresh processes (Triton's triton_key untouched at their
    start): the first hashes and keeps the key, the second takes it from the file, and both
    equal what Triton itself hashes."""
    import subprocess
    import sys

    script = (
        "import triton.runtime.cache as c\n"
        "from kernels.compiler_warmup import use_kept_key\n"
        "own = c.triton_key\n"
        "print(use_kept_key() == own(), c.triton_key() == own())\n"
    )
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path)}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]
    assert (tmp_path / compiler_warmup.KEY_FILE).exists()


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
