"""Triton's once-per-process setup, done on a background thread before the first kernel needs it.

The first kernel a process launches makes Triton hash its own installation (`triton_key`:
libtriton's shared library and the compiler's, backends' and language's sources, the key of its
on-disk cache) and import the modules compiling and loading a kernel needs. Nothing in that
depends on a model or a kernel, but it ran on the first token after a load: 0.42 s of the
first token's 0.96 s on the H200 host for Llama-3-8B, with the kernels already in the disk
cache (docs/measurements/2026-11-30-s26-call-6/first-token.txt). Started when the kernels'
operations are made for a GPU (engine/hearth/ops.py's KernelsOps), it runs while the weights
load, which waits on the disk and the copies, and the load waits for what is left of it at
its end (KernelsOps.finish_load): were the first compile to start while this thread still
hashed, it would compute the same key again beside it rather than wait for it.

The hashing runs in hashlib with the GIL released (1 MiB reads at a time); the imports take
module locks as any import does, so a kernel launched meanwhile on another thread waits for a
module being imported rather than seeing it half made. `triton_key` is cached per process:
called again by the first compile, it returns the key at once.
"""

from __future__ import annotations

import contextlib
import importlib
import threading

# imported by the first launch of a kernel found in the disk cache on a CUDA GPU (the
# profile above: the NVIDIA backend's modules, and Gluon's, which they import), beside the
# packages triton_key walks
MODULES = (
    "triton.compiler.compiler",
    "triton.backends.nvidia.compiler",
    "triton.backends.nvidia.driver",
    "triton.experimental.gluon",
)

_started: threading.Thread | None = None
_lock = threading.Lock()


def warm_compiler() -> None:
    """Triton's cache key and its compile-time imports, now, on this thread. A module that
    this Triton lacks, or that fails to import here (the NVIDIA backend's on another vendor's
    GPU), is skipped: the first compile does without it too, or meets the failure itself."""
    from triton.runtime.cache import triton_key

    triton_key()
    for name in MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


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
