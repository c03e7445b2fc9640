"""Ask the llama.cpp in this process which backends it was built with and which devices it sees.

For use inside the engine worker (and the engine probe); importing this module does not load
llama.cpp, calling `list_engine_devices` or `describe_engine` does.

llama-cpp-python binds llama.h but not ggml's backend registry (ggml-backend.h), so the few
functions needed are bound here with ctypes. They live in libggml / libggml-base, which libllama
loads; a symbol lookup through libllama's handle searches its dependencies too (Linux, macOS),
and on Windows (where a lookup searches one DLL) the ggml libraries next to it are opened
by name. Each binding is a fresh ctypes
function object, so llama_cpp's own function cache is left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from engine.hardware.engine_view import EngineDevice, EngineView
from engine.hardware.records import normalize_pci_bus_id

_size_p = ctypes.POINTER(ctypes.c_size_t)

# name: (restype, argtypes); C prototypes from ggml/include/ggml-backend.h beside each.
SIGNATURES: dict[str, tuple[Any, tuple[Any, ...]]] = {
    # size_t ggml_backend_dev_count(void);
    "ggml_backend_dev_count": (ctypes.c_size_t, ()),
    # ggml_backend_dev_t ggml_backend_dev_get(size_t index);
    "ggml_backend_dev_get": (ctypes.c_void_p, (ctypes.c_size_t,)),
    # const char * ggml_backend_dev_name(ggml_backend_dev_t device);
    "ggml_backend_dev_name": (ctypes.c_char_p, (ctypes.c_void_p,)),
    # const char * ggml_backend_dev_description(ggml_backend_dev_t device);
    "ggml_backend_dev_description": (ctypes.c_char_p, (ctypes.c_void_p,)),
    # void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
    "ggml_backend_dev_memory": (None, (ctypes.c_void_p, _size_p, _size_p)),
    # enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device);
    "ggml_backend_dev_type": (ctypes.c_int, (ctypes.c_void_p,)),
    # void ggml_backend_dev_get_props(ggml_backend_dev_t device, struct ggml_backend_dev_props *);
    "ggml_backend_dev_get_props": (None, (ctypes.c_void_p, ctypes.c_void_p)),
    # ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device);
    "ggml_backend_dev_backend_reg": (ctypes.c_void_p, (ctypes.c_void_p,)),
    # size_t ggml_backend_reg_count(void);
    "ggml_backend_reg_count": (ctypes.c_size_t, ()),
    # ggml_backend_reg_t ggml_backend_reg_get(size_t index);
    "ggml_backend_reg_get": (ctypes.c_void_p, (ctypes.c_size_t,)),
    # const char * ggml_backend_reg_name(ggml_backend_reg_t reg);
    "ggml_backend_reg_name": (ctypes.c_char_p, (ctypes.c_void_p,)),
    # void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name);
    "ggml_backend_reg_get_proc_address": (ctypes.c_void_p, (ctypes.c_void_p, ctypes.c_char_p)),
    # ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type);
    "ggml_backend_dev_by_type": (ctypes.c_void_p, (ctypes.c_int,)),
    # ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device);
    "ggml_backend_dev_buffer_type": (ctypes.c_void_p, (ctypes.c_void_p,)),
    # void ggml_backend_load_all_from_path(const char * dir_path);
    "ggml_backend_load_all_from_path": (None, (ctypes.c_char_p,)),
    # For llama.cpp's RPC backend (engine/llama/rpc.py):
    # ggml_backend_reg_t ggml_backend_reg_by_name(const char * name);
    "ggml_backend_reg_by_name": (ctypes.c_void_p, (ctypes.c_char_p,)),
    # void ggml_backend_register(ggml_backend_reg_t reg);
    "ggml_backend_register": (None, (ctypes.c_void_p,)),
    # size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg);
    "ggml_backend_reg_dev_count": (ctypes.c_size_t, (ctypes.c_void_p,)),
    # ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index);
    "ggml_backend_reg_dev_get": (ctypes.c_void_p, (ctypes.c_void_p, ctypes.c_size_t)),
    # ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);
    "ggml_backend_dev_by_name": (ctypes.c_void_p, (ctypes.c_char_p,)),
}

# enum ggml_backend_dev_type
DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}


class _DevCaps(ctypes.Structure):
    _fields_ = [
        ("async_", ctypes.c_bool),
        ("host_buffer", ctypes.c_bool),
        ("buffer_from_host_ptr", ctypes.c_bool),
        ("events", ctypes.c_bool),
        ("mmap_support", ctypes.c_bool),
    ]


class _DevProps(ctypes.Structure):
    """struct ggml_backend_dev_props, as of llama-cpp-python 0.3.36 (ggml 0.25)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("description", ctypes.c_char_p),
        ("memory_free", ctypes.c_size_t),
        ("memory_total", ctypes.c_size_t),
        ("type", ctypes.c_int),
        ("device_id", ctypes.c_char_p),
        ("caps", _DevCaps),
    ]


# struct ggml_backend_feature { const char * name; const char * value; };
class _Feature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


_GetFeatures = ctypes.CFUNCTYPE(ctypes.POINTER(_Feature), ctypes.c_void_p)


def _lib_dir(llama_cpp_module: Any) -> Path:
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    return Path(override) if override else Path(llama_cpp_module.__file__).parent / "lib"


def _candidate_libraries(llama_cpp_module: Any) -> list[Any]:
    libs = [llama_cpp_module.llama_cpp._lib]
    folder = _lib_dir(llama_cpp_module)
    if sys.platform == "win32":
        names = ["ggml.dll", "ggml-base.dll"]
    elif sys.platform == "darwin":
        names = ["libggml.dylib", "libggml-base.dylib"]
    else:
        names = ["libggml.so", "libggml-base.so"]
    for name in names:
        path = folder / name
        if path.exists():
            # Already loaded by libllama: this only takes another reference. RTLD_LOCAL (the
            # default) keeps ggml's symbols out of the global scope, where they could clash
            # with other libraries in the process (torch's CUDA libraries, say).
            try:
                libs.append(ctypes.CDLL(str(path)))
            except OSError:
                continue
    return libs


class GgmlBackendApi:
    """The ggml backend-registry functions, bound against the loaded llama.cpp libraries."""

    def __init__(self, libraries: list[Any]):
        self._functions: dict[str, Callable[..., Any]] = {}
        for name, (restype, argtypes) in SIGNATURES.items():
            prototype = ctypes.CFUNCTYPE(restype, *argtypes)
            for lib in libraries:
                try:
                    self._functions[name] = prototype((name, lib))
                    break
                except AttributeError:
                    continue

    def has(self, name: str) -> bool:
        return name in self._functions

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(f"the installed llama.cpp does not export {name}") from None


@cache
def ggml_api() -> GgmlBackendApi:
    import llama_cpp

    api = GgmlBackendApi(_candidate_libraries(llama_cpp))
    # Builds with GGML_BACKEND_DL=ON register nothing until the backend libraries are loaded.
    nothing_registered = api.has("ggml_backend_reg_count") and api.ggml_backend_reg_count() == 0
    if nothing_registered and api.has("ggml_backend_load_all_from_path"):
        api.ggml_backend_load_all_from_path(str(_lib_dir(llama_cpp)).encode())
    return api


def _text(raw: bytes | None) -> str:
    return raw.decode(errors="replace") if raw else ""


def _pci_bus_id(api: GgmlBackendApi, device: int) -> str | None:
    if not api.has("ggml_backend_dev_get_props"):
        return None
    # Spare room after the struct: a newer ggml with more fields writes into it, not past it.
    buffer = ctypes.create_string_buffer(ctypes.sizeof(_DevProps) + 256)
    api.ggml_backend_dev_get_props(device, buffer)
    props = _DevProps.from_buffer(buffer)
    return normalize_pci_bus_id(_text(props.device_id)) if props.device_id else None


def list_engine_devices() -> list[EngineDevice]:
    """Every device the loaded llama.cpp can use, with its free and total memory now."""
    api = ggml_api()
    devices = []
    for index in range(api.ggml_backend_dev_count()):
        device = api.ggml_backend_dev_get(index)
        if not device:
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        api.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
        reg = api.ggml_backend_dev_backend_reg(device)
        devices.append(
            EngineDevice(
                name=_text(api.ggml_backend_dev_name(device)),
                description=_text(api.ggml_backend_dev_description(device)),
                type=DEVICE_TYPES.get(api.ggml_backend_dev_type(device), "unknown"),
                backend=_text(api.ggml_backend_reg_name(reg)) if reg else "",
                free_bytes=int(free.value),
                total_bytes=int(total.value),
                pci_bus_id=_pci_bus_id(api, device),
            )
        )
    return devices


def local_gpu_offload() -> bool:
    """Whether this llama.cpp can put layers on a GPU of this machine. Not
    llama_supports_gpu_offload(): that also counts the RPC backend (helper machines), which
    every Hearth build has, so a CPU build on a machine with a GPU would plan for that GPU."""
    api = ggml_api()
    for index in range(api.ggml_backend_dev_count()):
        device = api.ggml_backend_dev_get(index)
        if not device or DEVICE_TYPES.get(api.ggml_backend_dev_type(device)) not in ("gpu", "igpu"):
            continue
        reg = api.ggml_backend_dev_backend_reg(device)
        if not reg or _text(api.ggml_backend_reg_name(reg)) != "RPC":
            return True
    return False


def cpu_buffer_type() -> int:
    """The CPU device's buffer type (ggml_backend_cpu_buffer_type): where tensors named by a
    buffer-type override (MoE experts kept in RAM) are placed."""
    api = ggml_api()
    device = api.ggml_backend_dev_by_type(0)  # GGML_BACKEND_DEVICE_TYPE_CPU
    if not device:
        raise RuntimeError("llama.cpp lists no CPU device")
    return int(api.ggml_backend_dev_buffer_type(device))


def list_backends() -> list[str]:
    """The backend registries compiled into (or loaded by) this llama.cpp: CPU, CUDA, ..."""
    api = ggml_api()
    regs = (api.ggml_backend_reg_get(i) for i in range(api.ggml_backend_reg_count()))
    return [_text(api.ggml_backend_reg_name(reg)) for reg in regs if reg]


def backend_features() -> dict[str, tuple[str, ...]]:
    """Build features per backend ("AVX2", "ARCHS=890"); "NAME=1" is shortened to "NAME"."""
    api = ggml_api()
    features: dict[str, tuple[str, ...]] = {}
    for index in range(api.ggml_backend_reg_count()):
        reg = api.ggml_backend_reg_get(index)
        address = api.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_get_features")
        if not address:
            continue
        items = _GetFeatures(address)(reg)
        found = []
        for i in range(256):  # NULL-terminated; the bound is a guard against a missing end
            if not items or not items[i].name:
                break
            name, value = _text(items[i].name), _text(items[i].value)
            found.append(name if value in ("1", "") else f"{name}={value}")
        features[_text(api.ggml_backend_reg_name(reg))] = tuple(found)
    return features


def describe_engine() -> EngineView:
    """The whole engine view: backends, devices, GPU offload, build features, system info."""
    began = time.perf_counter()
    import llama_cpp

    devices = list_engine_devices()
    return EngineView(
        backends=tuple(list_backends()),
        devices=tuple(devices),
        gpu_offload=local_gpu_offload(),
        features=backend_features(),
        system_info=_text(llama_cpp.llama_print_system_info()).strip(),
        llama_cpp_version=str(getattr(llama_cpp, "__version__", "")),
        elapsed_s=time.perf_counter() - began,
    )
