"""ggml's CPU backend through its public C API, bound with ctypes: the few functions
engine/hearth/cpu_experts.py builds and runs its graphs with, the library found without
importing llama-cpp-python (engine.hearth keeps its bindings out: pyproject's import
contracts), a persistent thread pool (GgmlCpu), and the repack buffer type llama.cpp puts its
CPU weights in (repack_buffer_type).

The prototypes are those of ggml.h, ggml-backend.h and ggml-cpu.h of the llama-cpp-python in
this environment, beside each binding. Two structs are declared: ggml_init_params (passed by
value to ggml_init) and ggml_threadpool_params, which ggml_threadpool_params_init fills and
GgmlCpu checks by reading its defaults back through the declared layout before using it.

ggml's CPU library as built here (and on the GPU host) runs a graph with OpenMP (it links
libgomp), not with the thread pool's own threads: each thread that calls
ggml_backend_graph_compute gets a team of libgomp threads of its own, kept for its next call.
release_openmp_threads frees the calling thread's team (below, and
expert_offload.free_main_thread_openmp for why).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
import weakref
from functools import cache
from pathlib import Path

GGML_TYPE_F32 = 0
GGML_TYPE_I32 = 26


class InitParams(ctypes.Structure):  # ggml.h: struct ggml_init_params
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]  # fmt: skip


class _ThreadpoolParams(ctypes.Structure):  # ggml.h: struct ggml_threadpool_params
    _fields_ = [
        ("cpumask", ctypes.c_bool * 512),  # GGML_MAX_N_THREADS
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


_p = ctypes.c_void_p
_i64 = ctypes.c_int64
# name: (restype, argtypes), C prototypes from ggml.h / ggml-backend.h / ggml-cpu.h
_BASE = {
    "ggml_init": (_p, [InitParams]),  # ggml_context * ggml_init(ggml_init_params)
    "ggml_free": (None, [_p]),  # void ggml_free(ggml_context *)
    "ggml_tensor_overhead": (ctypes.c_size_t, []),
    "ggml_graph_overhead": (ctypes.c_size_t, []),
    "ggml_new_tensor_1d": (_p, [_p, ctypes.c_int, _i64]),
    "ggml_new_tensor_2d": (_p, [_p, ctypes.c_int, _i64, _i64]),
    "ggml_new_tensor_3d": (_p, [_p, ctypes.c_int, _i64, _i64, _i64]),
    "ggml_get_data": (_p, [_p]),  # void * ggml_get_data(const ggml_tensor *)
    "ggml_nbytes": (ctypes.c_size_t, [_p]),
    "ggml_is_contiguous": (ctypes.c_bool, [_p]),
    # ggml_tensor * ggml_mul_mat_id(ctx, as, b, ids)
    "ggml_mul_mat_id": (_p, [_p, _p, _p, _p]),
    "ggml_add_id": (_p, [_p, _p, _p, _p]),  # ctx, a, b, ids: a[i0,i1,i2] + b[i0, ids[i1,i2]]
    "ggml_swiglu_split": (_p, [_p, _p, _p]),  # ctx, a, b: silu(a) * b
    "ggml_swiglu": (_p, [_p, _p]),  # ctx, a: silu(a's first half of ne0) * its second half
    "ggml_swiglu_oai": (_p, [_p, _p, _p, ctypes.c_float, ctypes.c_float]),  # + alpha, limit
    "ggml_new_graph": (_p, [_p]),
    "ggml_build_forward_expand": (None, [_p, _p]),
    # ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size)
    "ggml_backend_cpu_buffer_from_ptr": (_p, [_p, ctypes.c_size_t]),
    "ggml_backend_buffer_free": (None, [_p]),
    # enum ggml_status ggml_backend_tensor_alloc(buffer, tensor, void * addr)
    "ggml_backend_tensor_alloc": (ctypes.c_int, [_p, _p, _p]),
    # enum ggml_status ggml_backend_graph_compute(ggml_backend_t, ggml_cgraph *)
    "ggml_backend_graph_compute": (ctypes.c_int, [_p, _p]),
    "ggml_backend_free": (None, [_p]),
    # the CPU device's extra buffer types (repack): ggml_backend_reg_t / dev_t / buft_t
    "ggml_backend_reg_dev_get": (_p, [_p, ctypes.c_size_t]),
    "ggml_backend_reg_get_proc_address": (_p, [_p, ctypes.c_char_p]),
    "ggml_backend_buft_name": (ctypes.c_char_p, [_p]),
    "ggml_backend_buft_get_alloc_size": (ctypes.c_size_t, [_p, _p]),
    "ggml_backend_buft_alloc_buffer": (_p, [_p, ctypes.c_size_t]),
    "ggml_backend_buffer_get_base": (_p, [_p]),
    # void ggml_backend_tensor_set(tensor, const void * data, size_t offset, size_t size)
    "ggml_backend_tensor_set": (None, [_p, _p, ctypes.c_size_t, ctypes.c_size_t]),
    "ggml_backend_dev_supports_op": (ctypes.c_bool, [_p, _p]),
    "ggml_threadpool_params_init": (None, [ctypes.POINTER(_ThreadpoolParams), ctypes.c_int]),
}
_CPU = {
    "ggml_backend_cpu_reg": (_p, []),
    "ggml_backend_cpu_init": (_p, []),
    "ggml_backend_cpu_set_n_threads": (None, [_p, ctypes.c_int]),
    "ggml_backend_cpu_set_threadpool": (None, [_p, _p]),
    "ggml_threadpool_new": (_p, [ctypes.POINTER(_ThreadpoolParams)]),
    "ggml_threadpool_free": (None, [_p]),
}


class GgmlUnavailable(RuntimeError):
    """ggml's CPU library could not be found or bound (what to install is in the message)."""


def _library_dir() -> Path:
    """llama-cpp-python's lib/ (or LLAMA_CPP_LIB_PATH), found without importing llama_cpp:
    engine.hearth keeps llama.cpp's Python bindings out (pyproject's import contracts)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise GgmlUnavailable(
            "ggml's CPU library comes with llama-cpp-python, which is not installed"
        )
    return Path(spec.origin).parent / "lib"


def available() -> bool:
    """Whether ggml's CPU libraries are where ggml() would load them (not loaded here)."""
    try:
        folder = _library_dir()
    except GgmlUnavailable:
        return False
    ext = {"darwin": "dylib", "win32": "dll"}.get(sys.platform, "so")
    prefix = "" if sys.platform == "win32" else "lib"
    return all((folder / f"{prefix}ggml-{part}.{ext}").is_file() for part in ("base", "cpu"))


class _Ggml:
    """The functions above, bound to libggml-base and libggml-cpu (RTLD_LOCAL: ggml's symbols
    stay out of the process's global scope)."""

    def __init__(self, folder: Path):
        ext = {"darwin": "dylib", "win32": "dll"}.get(sys.platform, "so")
        prefix = "" if sys.platform == "win32" else "lib"
        try:
            base = ctypes.CDLL(str(folder / f"{prefix}ggml-base.{ext}"))
            cpu = ctypes.CDLL(str(folder / f"{prefix}ggml-cpu.{ext}"))
        except OSError as exc:
            raise GgmlUnavailable(f"ggml's CPU library could not be loaded: {exc}") from None
        for lib, table in ((base, _BASE), (cpu, _CPU)):
            for name, (restype, argtypes) in table.items():
                try:
                    fn = getattr(lib, name)
                except AttributeError:
                    raise GgmlUnavailable(
                        f"{lib._name} lacks {name}: this ggml is older than the one "
                        "engine/hearth/cpu_experts.py was written against"
                    ) from None
                fn.restype, fn.argtypes = restype, argtypes
                setattr(self, name[5:], fn)  # ggml_mul_mat_id -> self.mul_mat_id


@cache
def ggml() -> _Ggml:
    return _Ggml(_library_dir())


# ggml-backend.h: ggml_backend_buffer_type_t * (*ggml_backend_dev_get_extra_bufts_t)(dev)
_ExtraBufts = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


@cache
def repack_buffer_type() -> tuple[int, int] | None:
    """(the CPU device, its "CPU_REPACK" buffer type), or None where this ggml has none:
    weights set into such a buffer are rearranged (Q4_K into q4_K_8x8 on AVX2, say) for
    ggml's wider kernels, as llama.cpp does with the weights it keeps on the CPU."""
    lib = ggml()
    reg = lib.backend_cpu_reg()
    device = lib.backend_reg_dev_get(reg, 0)
    address = lib.backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts")
    if not reg or not device or not address:
        return None
    types = _ExtraBufts(address)(device)
    i = 0
    while types and types[i]:
        if lib.backend_buft_name(types[i]) == b"CPU_REPACK":
            return device, types[i]
        i += 1
    return None


_OMP_PAUSE_SOFT = 1  # omp.h: omp_pause_resource_t omp_pause_soft


@cache
def _openmp():
    """The libgomp ggml's CPU library computes with, where one is loaded (None otherwise: ggml
    built without OpenMP, or with another runtime). Found by its soname without loading
    anything (RTLD_NOLOAD): torch ships a libgomp.so.1 of its own and, imported first, is the
    one ggml's library binds to as well, so torch's CPU threads and ggml's share one runtime."""
    ggml()
    try:
        lib = ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD)
    except (OSError, AttributeError):
        return None
    lib.omp_pause_resource_all.argtypes = [ctypes.c_int]  # int omp_pause_resource_all(kind)
    lib.omp_pause_resource_all.restype = ctypes.c_int
    return lib


def release_openmp_threads() -> bool:
    """Free the calling thread's idle OpenMP team (libgomp's omp_pause_resource_all: its
    threads exit; a later parallel region on this thread makes them again). Why: libgomp
    counts every thread of every team in the process, and once they outnumber the CPUs it
    stops spinning at barriers (100 spins, then a futex sleep), so each of a ggml graph's
    barriers puts its threads to sleep and wakes them again. Returns whether a runtime was
    there to ask; a no-op where there is none, or where the caller is inside a parallel
    region."""
    lib = _openmp()
    if lib is None:
        return False
    lib.omp_pause_resource_all(_OMP_PAUSE_SOFT)
    return True


class GgmlCpu:
    """ggml's CPU backend with a thread pool of `n_threads`, shared by every layer computed
    on the CPU: one compute at a time, from any thread (`lock`, which a caller also holds
    around its graph's inputs and outputs: the backend's work buffer and the pool serve one
    graph). `poll`: how long
    idle threads spin before sleeping (ggml's 0-100; None keeps ggml's default, 50), for a
    ggml built without OpenMP; built with it (module docstring), the pool makes no threads
    and libgomp's own waiting applies. close() or garbage collection frees both."""

    def __init__(self, n_threads: int, poll: int | None = None):
        if n_threads < 1:
            raise ValueError(f"{n_threads} threads")
        lib = ggml()
        params = _ThreadpoolParams()
        lib.threadpool_params_init(ctypes.byref(params), n_threads)
        # ggml.c's defaults read back through this module's layout of the struct
        if (params.n_threads, params.prio, params.poll, params.paused) != (n_threads, 0, 50, False):
            raise GgmlUnavailable(
                "ggml_threadpool_params differs from the layout engine/hearth/ggml_cpu.py "
                f"declares (n_threads {params.n_threads}, prio {params.prio}, poll "
                f"{params.poll} read back; {n_threads}, 0, 50 expected)"
            )
        if poll is not None:
            params.poll = poll
        self.n_threads = n_threads
        self.backend = lib.backend_cpu_init()
        self.threadpool = lib.threadpool_new(ctypes.byref(params))
        if not self.backend or not self.threadpool:
            raise GgmlUnavailable("ggml's CPU backend or its thread pool could not be made")
        lib.backend_cpu_set_n_threads(self.backend, n_threads)
        lib.backend_cpu_set_threadpool(self.backend, self.threadpool)
        self._finalizer = weakref.finalize(self, _free_cpu, lib, self.backend, self.threadpool)
        self.lock = threading.RLock()

    def compute(self, graph: int) -> None:
        with self.lock:
            status = ggml().backend_graph_compute(self.backend, graph)
        if status != 0:
            raise RuntimeError(f"ggml_backend_graph_compute failed (status {status})")

    def close(self) -> None:
        self._finalizer()


def _free_cpu(lib: _Ggml, backend: int, threadpool: int) -> None:
    lib.backend_free(backend)
    lib.threadpool_free(threadpool)
