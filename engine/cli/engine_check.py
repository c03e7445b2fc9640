"""`hearth info MODEL --engine`: load the model in the engine worker (all layers offered to the
GPU, flash attention left to llama.cpp) and say where it really runs, from llama.cpp's own
buffers and settings. A GPU build that silently falls back to the CPU shows up here. Then the
Hearth engine: whether it can run the model on this machine (and if not, why), which engine
Best fit picks and why, and, where it can, a load with it: which engine the worker really used."""

from __future__ import annotations

from dataclasses import replace
from typing import TextIO

from engine.gguf import ModelInfo, read_model_info
from engine.planner import Planner
from engine.planner.engine_choice import engine_name, plan_engines
from engine.planner.hearth_plan import hearth_unavailable, plan_hearth
from engine.planner.settings import LoadSettings
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
    from engine.session import snapshot_machine

    machine = snapshot_machine(gpu_offload=ready.gpu_offload_supported)
    info = read_model_info(path)
    lines, can_run = hearth_lines(info, machine)
    out.writelines(f"  {line}\n" for line in lines)
    if can_run:
        hearth = plan_hearth(info, machine.plan_request())
        settings = hearth.settings if hearth.fits else None
        out.write(f"  {load_with_hearth(path, settings)}\n")
    return 0


def hearth_lines(info: ModelInfo, machine) -> tuple[list[str], bool]:
    """What the planner says of the Hearth engine for this file on this machine: whether it
    can run it (why not), and the engine Best fit picks (why). Pure: no load."""
    request = machine.plan_request()
    reason = hearth_unavailable(info, request)
    if reason:
        lines = [f"Hearth engine: not available here: {printable_line(reason)}"]
    else:
        lines = [f"Hearth engine: can run it on {printable_line(request.gpus[0].name)}"]
        hearth = plan_hearth(info, request)
        if hearth.choice is not None and hearth.choice.n_cpu_expert_layers:
            speed = hearth.tokens_per_second or 0.0
            lines.append(
                f"Hearth engine plan: {hearth.choice.experts_in_ram_text}; predicted "
                f"{speed:.0f} tokens/s (not measured)"
            )
    best = plan_engines(Planner(info), request)
    if best.choice is not None:
        note = next((n for n in best.notes if n.startswith("Engine:")), "")
        lines.append(f"Best fit: {engine_name(best.choice.engine)}. {printable_line(note)}")
    return lines, reason is None


def load_with_hearth(path: str, settings: LoadSettings | None = None) -> str:
    """Load with engine="hearth" in a fresh worker: which engine really ran it, or why not.
    `settings`: the Hearth engine's plan (its experts in RAM, say); else 2,048 tokens."""
    events = EventQueue()
    client = EngineClient(events)
    client.start()
    try:
        events.wait_for(p.Ready, timeout=TIMEOUT_S)
        params = p.ModelParams(path=path, n_ctx=2048, engine="hearth")
        if settings is not None:
            params = replace(settings.model_params(), n_ctx=min(2048, settings.n_ctx))
        client.load(params)
        loaded = events.wait_for(p.ModelLoaded, p.LoadFailed, timeout=TIMEOUT_S)
    finally:
        client.close()
    if isinstance(loaded, p.LoadFailed):
        return f"Hearth engine load failed: {printable_line(loaded.message)}"
    if isinstance(loaded, EngineCrashed):
        return f"Hearth engine load crashed the worker: {printable_line(loaded.message)}"
    why = loaded.engine_note or loaded.description
    return f"Hearth engine load: ran on {engine_name(loaded.engine)} ({printable_line(why)})"
