"""Triton's once-per-process setup, done on a background thread before the first kernel needs it.

The first kernel a process launches needs Triton's cache key (`triton_key`: a hash of
libtriton's shared library, 0.5 GB, and of the compiler's, backends' and language's sources,
the key of its on-disk cache) and the modules compiling and loading a kernel import. Nothing in
that depends on a model or a kernel: hashed on the first token after a load it took 0.42 s of
that token's 0.96 s on the H200 host for Llama-3-8B, with the kernels already in the disk cache
(docs/measurements/2026-11-30-s26-call-6/first-token.txt). Started when the kernels' operations
are made for a GPU (engine/hearth/ops.py's KernelsOps), this runs while the weights load, which
waits on the disk and the copies, and the load waits for what is left of it at its end
(KernelsOps.finish_load): were the first compile to start while this thread still hashed, it
would compute the same key again beside it rather than wait for it.

The key depends only on Triton's installation, so it is kept between processes: in Triton's
cache folder, beside a stamp of the files it hashes (each one's path, size, modification time
and inode: a stat of about 30 files, a millisecond). A process whose stamp matches takes the
kept key (no 0.5 GB read, which after a cold start went to the disk beside the weights'), and
Triton's `triton_key` is replaced by one returning it. A changed or reinstalled Triton changes
the stamp, and the key is hashed and kept again. Where the folder cannot be read or written,
or this Triton keeps its key elsewhere, the key is hashed as Triton does.

Hashing runs in hashlib with the GIL released (1 MiB reads at a time); the imports take module
locks as any import does, so a kernel launched meanwhile on another thread waits for a module
being imported rather than seeing it half made. Either way the key is then cached in the
process: the first compile's call returns it at once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import os
import threading
from pathlib import Path

# imported by the first launch of a kernel found in the disk cache on a CUDA GPU (the
# profile above: the NVIDIA backend's modules, and Gluon's, which they import), beside the
# packages triton_key walks
MODULES = (
    "triton.compiler.compiler",
    "triton.backends.nvidia.compiler",
    "triton.backends.nvidia.driver",
    "triton.experimental.gluon",
)

# Triton's own folders whose modules triton_key hashes (beside runtime/cache.py and libtriton)
HASHED_FOLDERS = ("compiler", "backends", "language")
KEY_FILE = "hearth-triton-key.json"

_started: threading.Thread | None = None
_lock = threading.Lock()


def warm_compiler() -> None:
    """Triton's cache key and its compile-time imports, now, on this thread. A module that
    this Triton lacks, or that fails to import here (the NVIDIA backend's on another vendor's
    GPU), is skipped: the first compile does without it too, or meets the failure itself."""
    use_kept_key()
    for name in MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def installation_stamp(root: Path) -> str:
    """A digest of the files under Triton's folder `root` that triton_key reads: each one's
    path, size, modification time and inode (any reinstall or edit changes one of them)."""
    files = [root / "runtime" / "cache.py", *sorted((root / "_C").glob("libtriton*"))]
    for folder in HASHED_FOLDERS:
        for here, _dirs, names in sorted(os.walk(root / folder)):
            files += [Path(here) / n for n in sorted(names) if n.endswith((".py", ".so"))]
    digest = hashlib.sha256(str(root).encode())
    for path in files:
        st = path.stat()
        digest.update(
            f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}".encode()
        )
    return digest.hexdigest()


def use_kept_key() -> str:
    """Triton's cache key, from KEY_FILE in its cache folder when the installation's stamp
    matches the one kept there, else hashed (and kept for the next process); in both cases
    what Triton's triton_key returns in this process from now on."""
    import triton
    import triton.runtime.cache as cache

    hashed = cache.triton_key
    try:
        root = Path(triton.__file__).parent
        stamp = f"{triton.__version__}:{installation_stamp(root)}"
        path = Path(triton.knobs.cache.dir) / KEY_FILE
    except (AttributeError, OSError):  # a Triton laid out otherwise: hash as it does
        return hashed()
    key = _kept(path, stamp)
    if key is None:
        key = hashed()
        _keep(path, stamp, key)
    cache.triton_key = functools.cache(lambda: key)
    return key


def _kept(path: Path, stamp: str) -> str | None:
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("stamp") != stamp:
        return None
    key = kept.get("key")
    return key if isinstance(key, str) and key else None


def _keep(path: Path, stamp: str, key: str) -> None:
    """Written whole or not at all (another process may read it meanwhile); a folder that
    cannot be written leaves the next process to hash again."""
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_text(json.dumps({"stamp": stamp, "key": key}))
        os.replace(part, path)
    except OSError:
        with contextlib.suppress(OSError):
            part.unlink()


def warm_compiler_in_background() -> threading.Thread:
    """warm_compiler on a daemon thread, once per process (later calls return that thread)."""
    global _started
    with _lock:
        if _started is None:
            _started = threading.Thread(target=_quietly, name="hearth-triton-warmup", daemon=True)
            _started.start()
        return _started


# the longest a load waits for the warm-up (it takes about a second): a warm-up stuck on a
# file or an import never holds a load; the first compile then does the work itself
WAIT_S = 30.0


def wait_for_warmup() -> None:
    """Return once the background warm-up, if one was started, has ended (or WAIT_S)."""
    with _lock:
        started = _started
    if started is not None:
        started.join(timeout=WAIT_S)


def _quietly() -> None:
    # a failure here is the first compile's to meet and report, on the thread that launches
    with contextlib.suppress(Exception):
        warm_compiler()
