"""`hearth info MODEL --engine`: load the model in the engine worker (all layers offered to the
GPU, flash attention left to llama.cpp) and say where it really runs, from llama.cpp's own
buffers and settings. A GPU build that silently falls back to the CPU shows up here."""

from __future__ import annotations

from typing import TextIO

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue
from engine.runtime.engine_output import crash_report
from engine.untrusted_text import printable_line

TIMEOUT_S = 600.0


def report_engine_placement(path: str, out: TextIO) -> int:
    events = EventQueue()
    client = EngineClient(events)
    client.start()
    try:
        ready = events.wait_for(p.Ready, timeout=TIMEOUT_S)
        if isinstance(ready, EngineCrashed):
            report = crash_report(ready.message, ready.cause_lines, ready.last_lines, n_tail=10)
            out.write(f"\nengine: {report}\n")
            return 1
        client.load(p.ModelParams(path=path, n_ctx=2048, n_gpu_layers=-1, flash_attn="auto"))
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=TIMEOUT_S)
    finally:
        client.close()
    out.write("\nengine:\n")
    out.write(f"  build: {ready.llama_system_info.strip()}\n")
    out.write(f"  GPU offload supported: {'yes' if ready.gpu_offload_supported else 'no'}\n")
    if not isinstance(loaded, p.ModelLoaded):
        out.write(f"  the load failed: {printable_line(loaded.message)}\n")
        for line in loaded.details:
            out.write(f"    ! {line}\n")
        return 1
    out.write(f"  runs on: {', '.join(loaded.runs_on) or 'unknown'}\n")
    out.write(f"  layers on the GPU: {loaded.n_gpu_layers} of {loaded.n_layers}\n")
    out.write(f"  flash attention: {loaded.flash_attn}\n")
    return 0
