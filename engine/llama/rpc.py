"""llama.cpp's RPC backend, from Python: serve this machine's devices to another Hearth
(`hearth host`), and use another machine's devices here (the engine worker, before a load).

Both go through the ggml-rpc library the engine is built with (installers/build_engine.py adds
-DGGML_RPC=ON on every backend), found by name in ggml's backend registry ("RPC"), so no
separate rpc-server program has to be built or shipped: `ggml_backend_rpc_start_server` is
exactly what llama.cpp's tools/rpc/rpc-server.cpp calls after parsing its flags.

    rpc_available() -> bool
    serving_devices(["CUDA0"]) -> [(handle, LocalDevice)]     the devices to serve
    start_server("0.0.0.0:50052", cache_dir, n_threads, handles)   blocks for good
    attach_servers(["pc2:50052"]) -> [device handle, ...]       RPC devices, llama.cpp's order

Attaching registers the helper's devices in this process for good (ggml has no unregister), so
a plan that drops a helper must load in a fresh worker; the worker passes the exact device list
to each load (llama_model_params.devices), which keeps an unused helper out of it meanwhile.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from engine.llama.devices import DEVICE_TYPES, _pci_bus_id, ggml_api

RPC_REGISTRY = b"RPC"
_CPU_TYPES = ("cpu", "accel")

# void ggml_backend_rpc_start_server(const char * endpoint, const char * cache_dir,
#     size_t n_threads, size_t n_devices, ggml_backend_dev_t * devices);
_StartServer = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p
)
# ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint);
_AddServer = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)


class RpcUnavailable(Exception):
    """The installed engine was built without llama.cpp's RPC backend."""


class HelperRefused(Exception):
    """A helper that a load cannot use; the message says why and what to do."""


@dataclass(frozen=True)
class LocalDevice:
    name: str  # ggml's device name: "CUDA0", "Vulkan0", "CPU"
    description: str
    backend: str  # the ggml registry's name: "CUDA", "CPU", ...
    type: str  # "gpu", "igpu", "cpu", "accel"
    free_bytes: int
    total_bytes: int
    pci_bus_id: str | None = None  # how detection's record of it is found (bandwidth)


def engine_version() -> str:
    """The installed llama-cpp-python's version (a helper says it to other machines)."""
    import llama_cpp

    return str(getattr(llama_cpp, "__version__", ""))


def rpc_available() -> bool:
    api = ggml_api()
    return api.has("ggml_backend_reg_by_name") and bool(api.ggml_backend_reg_by_name(RPC_REGISTRY))


def _rpc_function(name: bytes, prototype):
    api = ggml_api()
    registry = api.ggml_backend_reg_by_name(RPC_REGISTRY) if rpc_available() else None
    address = api.ggml_backend_reg_get_proc_address(registry, name) if registry else None
    if not address:
        raise RpcUnavailable(
            "This Hearth's engine was built without llama.cpp's RPC backend, which helper "
            "machines need. Run the installer again (it builds the engine with -DGGML_RPC=ON)."
        )
    return prototype(address)


def local_devices() -> list[tuple[int, LocalDevice]]:
    """(handle, facts) of every device of this machine (RPC devices left out)."""
    api = ggml_api()
    found = []
    for index in range(api.ggml_backend_dev_count()):
        handle = api.ggml_backend_dev_get(index)
        registry = api.ggml_backend_dev_backend_reg(handle)
        backend = (api.ggml_backend_reg_name(registry) or b"").decode(errors="replace")
        if backend == RPC_REGISTRY.decode():
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        api.ggml_backend_dev_memory(handle, ctypes.byref(free), ctypes.byref(total))
        found.append(
            (
                handle,
                LocalDevice(
                    name=(api.ggml_backend_dev_name(handle) or b"").decode(errors="replace"),
                    description=(api.ggml_backend_dev_description(handle) or b"").decode(
                        errors="replace"
                    ),
                    backend=backend,
                    type=DEVICE_TYPES.get(api.ggml_backend_dev_type(handle), "unknown"),
                    free_bytes=int(free.value),
                    total_bytes=int(total.value),
                    pci_bus_id=_pci_bus_id(api, handle),
                ),
            )
        )
    return found


def serving_devices(names: list[str] | tuple[str, ...] = ()) -> list[tuple[int, LocalDevice]]:
    """The devices `hearth host` serves: those named, else every GPU, else the CPU (the choice
    tools/rpc/rpc-server.cpp makes). Raises ValueError naming the devices there are."""
    devices = local_devices()
    if names:
        by_name = {facts.name.lower(): (handle, facts) for handle, facts in devices}
        missing = [name for name in names if name.lower() not in by_name]
        if missing:
            there = ", ".join(f"{f.name} ({f.description})" for _, f in devices)
            raise ValueError(f"no device named {', '.join(missing)}; this machine has {there}")
        return [by_name[name.lower()] for name in names]
    accelerators = [(h, f) for h, f in devices if f.type not in _CPU_TYPES]
    return accelerators or [(h, f) for h, f in devices if f.type == "cpu"][:1]


def start_server(endpoint: str, cache_dir: str | None, n_threads: int, handles: list[int]) -> None:
    """Serve `handles` at `endpoint` ("host:port"); returns only if the server could not start
    (llama.cpp prints why on stderr)."""
    start = _rpc_function(b"ggml_backend_rpc_start_server", _StartServer)
    array = (ctypes.c_void_p * len(handles))(*handles)
    cache = cache_dir.encode() if cache_dir else None
    start(endpoint.encode(), cache, n_threads, len(handles), ctypes.cast(array, ctypes.c_void_p))


def attach_servers(endpoints: list[str] | tuple[str, ...]) -> list[int]:
    """Register each helper's devices with ggml (once per helper per process) and return their
    handles, helpers in the order given. Each helper is checked first (check_helper): llama.cpp
    aborts the process on a helper it cannot reach or of another protocol version."""
    add_server = _rpc_function(b"ggml_backend_rpc_add_server", _AddServer)
    api = ggml_api()
    for endpoint in endpoints:
        check_helper(endpoint)
    handles: list[int] = []
    for endpoint in endpoints:
        registry = add_server(endpoint.encode())
        _attached.add(endpoint)
        if not registry:
            raise HelperRefused(f"The helper at {endpoint} offers no devices; see `hearth host`.")
        if registry not in _registered:
            api.ggml_backend_register(registry)
            _registered.add(registry)
        count = api.ggml_backend_reg_dev_count(registry)
        handles += [api.ggml_backend_reg_dev_get(registry, i) for i in range(count)]
    return handles


_registered: set[int] = set()
_attached: set[str] = set()  # helpers this process has connected to


def check_helper(endpoint: str) -> None:
    """Raise HelperRefused, saying what to do, where llama.cpp's RPC client would abort: the
    helper does not answer, or speaks another protocol version (both named)."""
    from engine.hardware.remote import HelperBusy, RemoteHostError, probe_remote

    try:
        probe_remote(endpoint, measure_link=False)
    except HelperBusy as exc:
        if endpoint not in _attached:  # else it is this process's own connection that holds it
            raise HelperRefused(str(exc)) from None
    except RemoteHostError as exc:
        raise HelperRefused(str(exc)) from None


def local_offload_devices() -> list[int]:
    """The local devices llama.cpp would offload to by itself: the GPUs, else the integrated
    GPUs (llama_model_load_from_file's default choice, RPC devices aside)."""
    devices = local_devices()
    gpus = [h for h, f in devices if f.type == "gpu"]
    return gpus or [h for h, f in devices if f.type == "igpu"]
