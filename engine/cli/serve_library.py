"""`hearth serve` without a model: the whole Library, each model loaded when a request names it
(engine/server/model_pool.py), planned by the same load policy as everywhere.

Every model is planned with the server's --ctx x --parallel tokens of context, on this machine
as it was when the server started (less --memory-limit, when given); models stay loaded
together while their plans fit the budgets together.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from engine.enums import KV_TYPES
from engine.server.memory_ledger import Budgets
from engine.server.model_pool import ModelRefused, PlannedModel
from engine.session import (
    MachineSnapshot,
    PlanSource,
    RememberedChoice,
    UnusableModelFile,
    plan_load,
    sibling_files,
)

GIB = 1024**3


def machine_within(machine: MachineSnapshot, limit_bytes: int | None) -> MachineSnapshot:
    """The snapshot with no device offering more than `limit_bytes` free (None: as it is)."""
    if limit_bytes is None:
        return machine
    devices = tuple(
        replace(d, free_bytes=min(d.free_bytes, limit_bytes)) if d.free_bytes is not None
        else replace(d, free_bytes=limit_bytes)
        for d in machine.devices
    )  # fmt: skip
    return replace(machine, detection=replace(machine.detection, devices=devices))


def budgets_of(machine: MachineSnapshot) -> Budgets:
    """What plans may take on each device ("host": system RAM), as the planner is asked."""
    request = machine.plan_request()
    return {**{g.id: g.budget_bytes for g in request.gpus}, "host": request.host_budget_bytes}


def library_planner(machine: MachineSnapshot, args: argparse.Namespace):
    """plan(path) -> PlannedModel for the pool; ModelRefused with the plan's numbers."""
    n_ctx = args.ctx * args.parallel
    layers = args.gpu_layers
    chosen = RememberedChoice(
        n_ctx=n_ctx,
        kv_type=args.kv or KV_TYPES[0],
        n_gpu_layers=None if layers is None or layers < 0 else layers,
    )

    def plan(path: Path) -> PlannedModel:
        try:
            decision = plan_load(path, machine, chosen, siblings=sibling_files(path))
        except UnusableModelFile as exc:
            raise ModelRefused(str(exc)) from None
        if decision.source != PlanSource.CHOSEN or decision.params is None:
            text = (f"{path.name} with {n_ctx:,} tokens of context ({args.parallel} x "
                    f"{args.ctx:,}), {chosen.kv_type} KV, needs {decision.shortfall_text()} than "
                    "this server may use, even with no other model loaded.")  # fmt: skip
            if decision.fits:
                text += f" What fits: {decision.summary()}: start the server with less --ctx."
            else:
                text += " " + decision.refusal()
            raise ModelRefused(text)
        params = replace(decision.params, n_parallel=args.parallel, n_threads=args.threads)
        need = {u.id: u.total_bytes for u in decision.plan.devices}
        return PlannedModel(params=params, need=need, summary=decision.summary())

    return plan


def library_catalogue():
    """The Library's models as the window lists them (the starter model among them)."""
    from engine.hub.library import Library
    from engine.hub.settings import load_settings
    from engine.starter_model import starter_model_path

    settings = load_settings()
    starter = starter_model_path()

    def catalogue() -> list[Path]:
        library = Library(settings.models_dir, scan_hf_cache=settings.scan_hf_cache,
                          bundled=(starter,) if starter is not None else ())  # fmt: skip
        return [m.path for m in library.scan() if m.error is None]

    return catalogue, settings.models_dir


def serve_library(args: argparse.Namespace, config, keep_alive_s: float) -> int:
    """Serve the Library until Ctrl+C; the exit status."""
    import sys

    from engine.cli.planning import machine_after_start
    from engine.runtime.client import EngineClient, EventQueue
    from engine.server.console import Console
    from engine.server.keep_alive import describe_keep_alive
    from engine.server.model_pool import ModelPool, PoolSettings
    from engine.server.runner import serve_forever
    from engine.server.server_state import ServerState
    from engine.untrusted_text import printable_line

    # A worker says whether this engine can offload to a GPU (the plans need it); it ends at
    # once: each model gets a worker of its own when it is loaded.
    events = EventQueue()
    probe = EngineClient(events)
    probe.start()
    try:
        machine = machine_after_start(events, args.load_timeout)
    finally:
        probe.close()
    limit = None if args.memory_limit is None else int(args.memory_limit * GIB)
    machine = machine_within(machine, limit)
    catalogue, models_dir = library_catalogue()
    limits = config.limits
    pool = ModelPool(
        catalogue,
        library_planner(machine, args),
        budgets_of(machine),
        PoolSettings(keep_alive_s=keep_alive_s, queue_length=limits.queue_length,
                     stop_grace_s=limits.stop_grace_seconds, load_timeout_s=args.load_timeout),
        library=models_dir,
        say=Console(sys.stderr).line,
    )  # fmt: skip
    state = ServerState(link=None, config=config, models=pool)
    console = Console()
    state.log.subscribe(lambda record: console.line(printable_line(record.line())))
    names = [Path(path).name for path, _ in pool.available()]
    console.line(
        f"Hearth API on {config.base_url} (OpenAI) and {config.base_url[:-3]}/api (Ollama): "
        f"the Library's {len(names)} models, each loaded when a request names it, "
        f"{args.parallel} request(s) at once per model of {args.ctx} tokens each; idle models "
        "unload after "
        f"{describe_keep_alive(keep_alive_s)}. Docs: {config.base_url[:-3]}/docs. Ctrl+C stops."
    )
    from engine.cli.background import running_record

    with running_record(config, "the Library", args.log_file):
        serve_forever(state)
    return 0
