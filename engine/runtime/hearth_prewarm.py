"""The Hearth engine's imports, made in the background while the person picks a model.

A Hearth load in a fresh worker spent 3.4-5.5 s importing torch, Triton and kernels/ before it
read a byte (H200, docs/measurements/2026-11-28-h35l-load-h200.txt); llama.cpp's load has no
such cost. The worker announces Ready long before a Load arrives, so it starts these imports
then, on a daemon thread, wherever the Hearth engine could run:

- torch and Triton installed (the kernels extra), and an NVIDIA GPU that NVML lists. NVML is
  asked, not torch: it answers without loading the CUDA libraries, so a machine without an
  NVIDIA GPU imports nothing. `HEARTH_ENGINE_DEVICE` set (the engine forced onto a device, as
  the tests do) counts as "could run" without the GPU check;
- and torch importable beside this llama.cpp build: the same child-process check a Hearth load
  makes first (torch_beside_llama.py), since a build with its own static C++ runtime ends the
  process that imports torch after it.

The warm-up imports modules, initializes the CUDA driver (`torch.cuda.is_available()`:
cuInit, no context) and does Triton's once-per-process setup before a first kernel
(kernels/compiler_warmup.py: the cache key of its installation, kept between processes). It
makes no CUDA context: that would take 0.3 s off a Hearth load but hold about 600 MiB of GPU
memory (621 MiB on the H100) from Ready on, memory the GUI's plan reads as used and the Hearth
memory model counts again as the context, and that a person who then loads llama.cpp never
gets back.

Threads: Python takes a lock per module, so a module both threads import is imported once;
what it does not make safe is one thread using a module that the other is half-way through
importing. So a Hearth load waits for the whole warm-up first (`wait`); llama.cpp loads do not
wait: they import nothing the warm-up imports (the GGUF reader they share is imported before
the thread starts), and llama.cpp's own work runs in C with the GIL released. A failure while
warming is one line on stderr; the load that follows then meets the same failure itself and
reports it as it always has (or falls back to llama.cpp with the reason).

    start(log=print)    # after Ready; imports nothing where the Hearth engine cannot run
    wait()              # before a Hearth load: the warm-up finished (or failed), if one began
    pause(); resume()   # around a llama.cpp model: no import starts while it is loaded

While a llama.cpp model is loaded the warm-up starts no further import (`pause`, from the
worker's load; `resume` at unload, and `wait` resumes it). The imports run Python bytecode
holding the GIL, and a decode loop takes the GIL back after every llama.cpp call: beside a busy
Python thread it waits up to the interpreter's switch interval (5 ms) each time. Measured on
the 2-core development machine (benchmarks/gil_beside_decode.py, SmolLM2-135M, one llama.cpp
thread): 54-60 tok/s alone, 31-32 beside a thread running Python
(docs/measurements/2026-11-30-s24-gil-beside-decode-cpu.txt). On an H200 the imports did
not measurably slow llama.cpp's decode of Llama-3-8B in a fresh worker (270.4 tok/s with the
warm-up left running beside it, 267.9-269.9 paused, llama-bench 272.7:
docs/measurements/2026-11-30-s25-call-1/; why the 2-core machine's halving does not show
there is not known). A module already being imported when a load arrives still finishes (an
import cannot be stopped).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import threading
import time
from collections.abc import Callable, Iterable

from engine.hearth import torch_missing_reason
from engine.runtime.torch_beside_llama import torch_import_problem

ENV = "HEARTH_PREWARM"  # "0": nothing is imported ahead (measuring the unwarmed load)
DEVICE_ENV = "HEARTH_ENGINE_DEVICE"  # hearth_load.DEVICE_ENV (not imported: it imports torch)

# What a Hearth load imports, heaviest first: torch, Triton, the decode path's kernels and the
# engine's modules (engine/runtime/hearth_load.py's load_transformer and hearth_driver.py's
# HearthContext).
MODULES = (
    "torch",
    "torch.nn.functional",
    "triton",
    "triton.language",
    "kernels.packed_weight",
    "kernels.gemv",
    "kernels.act_quant",
    "kernels.norms",
    "kernels.activations",
    "kernels.rope",
    "kernels.rope_tables",
    "kernels.kv_formats",
    "kernels.kv_cache",
    "kernels.decode_launch",
    "kernels.dequant",
    "kernels.grouped_attention",
    "engine.hearth.config",
    "engine.hearth.capabilities",
    "engine.hearth.expert_offload",
    "engine.hearth.ops",
    "engine.hearth.weights",
    "engine.hearth.forward",
    "engine.hearth.cache_layout",
    "engine.hearth.caches",
    "engine.hearth.decode_graph",
    "engine.hearth.sampler",
)
# Imported on the caller's thread before the warm-up starts: the llama.cpp load path uses them
# too (model_open.refused_by_header), so neither thread ever sees them half-imported.
SHARED_FIRST = ("engine.gguf", "engine.gguf.load_check")


def reason_not_to_warm(nvidia_gpus: Callable[[], int] | None = None) -> str | None:
    """None when the Hearth engine could run here, else why nothing is warmed."""
    if os.environ.get(ENV) == "0":
        return f"turned off ({ENV}=0)"
    if reason := torch_missing_reason():
        return reason
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed (the kernels extra)"
    if os.environ.get(DEVICE_ENV):
        return None
    if (nvidia_gpus or nvidia_gpu_count)() == 0:
        return "no NVIDIA GPU visible to NVML"
    return None


def nvidia_gpu_count() -> int:
    """GPUs NVML lists (0 without the driver or its Python bindings); loads no CUDA library."""
    try:
        import pynvml
    except ImportError:
        return 0
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver: NVMLError of one kind or another
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def import_engine(
    modules: Iterable[str] = MODULES, importer: Callable[[str], object] = importlib.import_module
) -> None:
    """Import the Hearth engine's modules (raises what an import raises)."""
    problem = torch_import_problem()
    if problem:
        raise RuntimeError(problem)
    for name in modules:
        _while_paused()
        importer(name)
    if not os.environ.get(DEVICE_ENV):
        import torch

        torch.cuda.is_available()  # cuInit: the driver, not a context
        _while_paused()
        from kernels.compiler_warmup import warm_compiler

        warm_compiler()  # Triton's cache key and compile-time imports: no context either


class Prewarm:
    """One warm-up on a daemon thread, which first asks `reason` whether to warm at all (NVML
    takes a moment: the worker's command loop does not wait for it); `wait` returns once the
    thread has finished either way."""

    def __init__(
        self,
        warm: Callable[[], None],
        log: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        reason: Callable[[], str | None] = lambda: None,
    ):
        self._warm, self._log, self._clock, self._reason = warm, log, clock, reason
        self._done = threading.Event()
        self._go = threading.Event()  # cleared while a llama.cpp model is loaded (`pause`)
        self._go.set()
        self.skipped: str | None = None  # why nothing was warmed here
        self.seconds: float | None = None  # the warm-up's duration, once it finished
        self.error: str | None = None  # why it failed, if it did

    def start(self) -> Prewarm:
        threading.Thread(target=self._run, name="hearth-prewarm", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            self.skipped = self._reason()
            if self.skipped:
                self._log(f"hearth worker: Hearth engine not imported ahead: {self.skipped}")
                return
            self._warm_up()
        finally:
            self._done.set()  # after the line, so that a load that waited finds it said

    def _warm_up(self) -> None:
        started = self._clock()
        try:
            self._warm()
        except Exception as exc:  # logged; the next Hearth load meets it and says so itself
            self.error = f"{type(exc).__name__}: {exc}"
        self.seconds = self._clock() - started
        if self.error is None:
            self._log(
                f"hearth worker: Hearth engine imported ahead of a load in {self.seconds:.1f} s"
            )
        else:
            # worded apart from engine_output.py's cause lines: a later crash is not this
            self._log(
                "hearth worker: the Hearth engine was not imported ahead (a Hearth load tries "
                f"again and says why it cannot run): {self.error}"
            )

    def pause(self) -> None:
        """No import starts until `resume` (or `wait`): one in progress finishes."""
        self._go.clear()

    def resume(self) -> None:
        self._go.set()

    def wait_unpaused(self) -> None:
        """Block while paused (the warm-up's thread, between imports)."""
        self._go.wait()

    def wait(self) -> float:
        """Block until the warm-up has finished (resuming it if paused); the seconds this call
        waited."""
        self.resume()
        if self._done.is_set():
            return 0.0
        started = self._clock()
        self._done.wait()
        waited = self._clock() - started
        if not self.skipped:
            self._log(
                f"hearth worker: the load waited {waited:.1f} s for the Hearth engine's imports"
            )
        return waited


_current: Prewarm | None = None


def start(
    log: Callable[[str], None],
    *,
    warm: Callable[[], None] = import_engine,
    reason: Callable[[], str | None] = reason_not_to_warm,
) -> Prewarm:
    """Start the warm-up thread; it warms only where the Hearth engine could run (`reason`:
    None) and otherwise logs why not."""
    global _current
    for name in SHARED_FIRST:
        importlib.import_module(name)
    _current = Prewarm(warm, log, reason=reason).start()
    return _current


def wait() -> None:
    """Before a Hearth load: let a warm-up in progress finish (no-op without one)."""
    if _current is not None:
        _current.wait()


def pause() -> None:
    """A llama.cpp model is being loaded: start no further import (the module docstring)."""
    if _current is not None:
        _current.pause()


def resume() -> None:
    """No llama.cpp model is loaded any more: the warm-up may go on."""
    if _current is not None:
        _current.resume()


def _while_paused() -> None:
    if _current is not None:
        _current.wait_unpaused()
