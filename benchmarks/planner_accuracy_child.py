"""The child side of benchmarks/planner_accuracy.py: GPU memory readings, one load with given
settings (llama.cpp's low-level API, its log captured), and a memory hog that leaves a chosen
amount of GPU memory free. Runs in separate processes, so an out-of-memory abort ends one cell.

    python benchmarks/planner_accuracy_child.py load SPEC_JSON   -> one JSON line
    python benchmarks/planner_accuracy_child.py hog BYTES_TO_LEAVE  (until stdin closes)
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

MIB = 1024**2
PREFILL = 512
_BUFFER = re.compile(r"(\S+)\s+(model|KV|compute|output) buffer size =\s+([\d.]+) MiB")


# -- GPU memory readings (NVML, else nvidia-smi) -------------------------------------------------


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:
        return None, None


def device_memory() -> tuple[int | None, int | None]:
    """(used, total) bytes of GPU 0; (None, None) without an NVIDIA driver."""
    nvml, handle = _nvml()
    if nvml is not None:
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.used), int(info.total)
    if shutil.which("nvidia-smi") is None:
        return None, None
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits",
         "-i", "0"], capture_output=True, text=True, check=True,
    ).stdout.split(",")  # fmt: skip
    return int(out[0]) * MIB, int(out[1]) * MIB


def process_memory(pid: int) -> int | None:
    """GPU memory used by process `pid`, if the driver tells (not always inside containers)."""
    nvml, handle = _nvml()
    if nvml is not None:
        try:
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == pid and proc.usedGpuMemory:
                    return int(proc.usedGpuMemory)
        except Exception:
            pass
        return None
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid) and parts[1].isdigit():
            return int(parts[1]) * MIB
    return None


# -- the child: load with given settings, prefill, report ----------------------------------------


def _cpu_buffer_type(C):
    """ggml_backend_cpu_buffer_type(), which llama.cpp's override path compares against."""
    lib_dir = Path(C.__file__).parent / "lib"
    for name in ("libggml-cpu.so", "libggml.so"):
        try:
            lib = ctypes.CDLL(str(lib_dir / name))
            fn = lib.ggml_backend_cpu_buffer_type
            fn.restype = ctypes.c_void_p
            return fn()
        except (OSError, AttributeError):
            continue
    base = ctypes.CDLL(str(lib_dir / "libggml-base.so"))
    base.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    base.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    base.ggml_backend_dev_buffer_type.restype = ctypes.c_void_p
    base.ggml_backend_dev_buffer_type.argtypes = [ctypes.c_void_p]
    return base.ggml_backend_dev_buffer_type(base.ggml_backend_dev_by_type(0))  # CPU = 0


class _Override(ctypes.Structure):
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def child(spec: dict) -> dict:
    import llama_cpp.llama_cpp as C

    lines: list[str] = []

    @C.llama_log_callback
    def log(level, text, user_data):
        lines.append(text.decode("utf-8", "replace"))

    C.llama_log_set(log, None)
    C.llama_backend_init()
    mp = C.llama_model_default_params()
    mp.n_gpu_layers = spec["n_gpu_layers"]
    keep = []
    if spec.get("tensor_split"):
        arr = (ctypes.c_float * C.llama_max_devices())(*spec["tensor_split"])
        keep.append(arr)
        mp.tensor_split = arr
    if spec.get("overrides"):
        cpu = _cpu_buffer_type(C)
        items = [_Override(p.encode(), cpu) for p, _ in spec["overrides"]] + [_Override(None, None)]
        arr = (_Override * len(items))(*items)
        keep.append(arr)
        mp.tensor_buft_overrides = ctypes.cast(arr, ctypes.c_void_p)
    result: dict = {"ok": False, "stage": "load"}
    model = C.llama_model_load_from_file(spec["path"].encode(), mp)
    if not model:
        result["log_tail"] = "".join(lines)[-3000:]
        return result
    cp = C.llama_context_default_params()
    cp.n_ctx = spec["n_ctx"]
    cp.n_batch = min(spec.get("n_batch", 2048), spec["n_ctx"])
    cp.n_ubatch = min(spec.get("n_ubatch", 512), cp.n_batch)
    cp.flash_attn_type = {"on": 1, "off": 0, "auto": -1}[spec["flash_attn"]]
    types = {"f16": C.GGML_TYPE_F16, "q8_0": C.GGML_TYPE_Q8_0, "q4_0": C.GGML_TYPE_Q4_0}
    cp.type_k, cp.type_v = types[spec["type_k"]], types[spec["type_v"]]
    cp.swa_full = spec.get("swa_full", False)
    cp.n_outputs_max = spec.get("n_outputs_max", 0)
    result["stage"] = "context"
    ctx = C.llama_init_from_model(model, cp)
    if not ctx:
        result["log_tail"] = "".join(lines)[-3000:]
        return result
    pid = os.getpid()
    result["after_load"] = {"process": process_memory(pid), "device_used": device_memory()[0]}
    result["stage"] = "prefill"
    n_vocab = C.llama_vocab_n_tokens(C.llama_model_get_vocab(model))
    tokens = [(i * 7919 + 17) % n_vocab for i in range(spec.get("prefill", PREFILL))]
    for start in range(0, len(tokens), cp.n_batch):
        chunk = tokens[start : start + cp.n_batch]
        arr = (C.llama_token * len(chunk))(*chunk)
        rc = C.llama_decode(ctx, C.llama_batch_get_one(arr, len(chunk)))
        if rc != 0:
            result["decode_rc"] = rc
            result["log_tail"] = "".join(lines)[-3000:]
            return result
    C.llama_synchronize(ctx)
    result["after_prefill"] = {"process": process_memory(pid), "device_used": device_memory()[0]}
    result["stage"] = "decode"
    result["decode_tokens_per_second"] = _decode_speed(C, ctx, tokens[-1], spec.get("decode", 32))
    buffers: dict[str, float] = {}
    for dev, kind, mib in _BUFFER.findall("".join(lines)):
        buffers[f"{dev} {kind}"] = round(buffers.get(f"{dev} {kind}", 0.0) + float(mib), 2)
    text = "".join(lines)
    result.update(
        ok=True,
        stage="done",
        buffers_mib=buffers,
        n_ctx_real=C.llama_n_ctx(ctx),
        gpu_offload=bool(C.llama_supports_gpu_offload()),
        overrides_applied="tensor overrides to CPU" in text,  # llama.cpp warns once when used
    )
    C.llama_free(ctx)
    C.llama_model_free(model)
    return result


def _decode_speed(C, ctx, token: int, steps: int) -> float | None:
    """Tokens per second over `steps` one-token decodes after the prefill (the bandwidth-bound
    case the planner's speed model predicts); the first step is a warm-up."""
    one = (C.llama_token * 1)(token)
    started = None
    for i in range(steps + 1):
        if C.llama_decode(ctx, C.llama_batch_get_one(one, 1)) != 0:
            return None
        C.llama_synchronize(ctx)
        if i == 0:
            started = time.perf_counter()
    return steps / (time.perf_counter() - started) if steps else None


def hog(leave_bytes: int) -> None:
    """Hold GPU 0's memory until only `leave_bytes` stay free; exit when stdin closes."""
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    remaining = free.value - leave_bytes
    ptrs = []
    chunk = 256 * MIB
    while remaining > 0:
        size = min(chunk, remaining)
        ptr = ctypes.c_uint64()
        if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) != 0:
            if chunk <= 2 * MIB:
                break
            chunk //= 2
            continue
        ptrs.append(ptr)
        remaining -= size
    cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    print(f"ready {free.value}", flush=True)
    sys.stdin.read()


def main(argv: list[str]) -> int:
    if argv[:1] == ["load"]:
        print(json.dumps(child(json.loads(argv[1]))), flush=True)
        return 0
    if argv[:1] == ["hog"]:
        hog(int(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
