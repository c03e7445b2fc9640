"""The load policy on the command line: `hearth chat`, `bench` and `plan --load` load nothing the
planner did not check, exactly as the window does (engine.session.plan_load).

Options given on the command line (--ctx, --kv, --gpu-layers) are the person's choice: used if
they fit, refused with the reason if not (a terminal cannot ask, and a silent change would
surprise). Without them, the choice remembered from the window's Model page, else the best fit.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from engine.cli import numbers
from engine.enums import KV_TYPES
from engine.planner.fill_gpu import margin_text
from engine.runtime import protocol as p
from engine.session import (
    MIN_CONTEXT,
    LoadDecision,
    MachineSnapshot,
    PlanSource,
    RememberedChoice,
    RememberedSettings,
    UnusableModelFile,
    plan_load,
    sibling_files,
    snapshot_machine,
)
from engine.session.machine import probe_helpers
from engine.untrusted_text import printable_line


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    # Range-checked (engine.cli.numbers): --ctx 1099511627776 wrapped to 0 in llama.cpp, and
    # --ctx 0 or -5 failed deep in the load.
    parser.add_argument(
        "--ctx",
        type=numbers.context_tokens,
        metavar="N",
        help=f"context length in tokens, {numbers.MIN_CONTEXT_TOKENS} to "
        f"{numbers.MAX_CONTEXT_TOKENS:,} (default: the plan's)",
    )
    parser.add_argument("--kv", choices=list(KV_TYPES), help="KV cache type (default: the plan's)")
    add_fill_gpu_argument(parser)
    parser.add_argument(
        "--gpu-layers",
        type=numbers.gpu_layers,
        metavar="N",
        help="layers on the GPU, -1 for all (default: the plan's)",
    )


def add_fill_gpu_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fill-gpu",
        action="store_true",
        help="use all of the GPU: the longest context that fits (up to the model's training "
        f"context, every layer on the GPU), leaving the safety margin free "
        f"({margin_text().replace('%', '%%')})",  # argparse formats help with %
    )


def fill_gpu_conflict(args: argparse.Namespace) -> str | None:
    """Why --fill-gpu cannot go with the other options given, or None."""
    if not getattr(args, "fill_gpu", False):
        return None
    given = [f"--{name.replace('_', '-')}" for name in ("ctx", "kv", "gpu_layers")
             if getattr(args, name, None) is not None]  # fmt: skip
    if given:
        return (
            f"--fill-gpu chooses the context itself; leave out {', '.join(given)} (or leave out "
            "--fill-gpu to load with those)."
        )
    return None


def add_projector_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mmproj",
        metavar="FILE",
        help="the vision projector (mmproj GGUF) to load with the model (default: the one "
        "beside it, if any)",
    )


def chosen_from(args: argparse.Namespace) -> RememberedChoice | None:
    """The command line's choice, or None when it makes none (then the remembered one)."""
    ctx, kv, layers = getattr(args, "ctx", None), getattr(args, "kv", None), args.gpu_layers
    if ctx is None and kv is None and layers is None:
        return None
    return RememberedChoice(
        n_ctx=ctx or 4096,
        kv_type=kv or KV_TYPES[0],
        n_gpu_layers=None if layers is None or layers < 0 else layers,
        engine=getattr(args, "engine", None) or "llama",
    )


def engine_for_context(
    path: str | Path, machine: MachineSnapshot, *, n_ctx: int, n_parallel: int, asked: str
) -> str:
    """The engine a load of `path` with n_ctx tokens takes: `asked`, or for "auto" the one the
    best fit picks at that context on this machine (engine/planner/engine_choice.py: the
    measured figures). A file that cannot be read gets llama.cpp here; the load then says why."""
    if asked != "auto":
        return asked
    from engine.planner import Planner
    from engine.session import check_model_file
    from engine.session.load_policy import best_fit

    try:
        info = check_model_file(Path(path))
    except UnusableModelFile:
        return "llama"
    plan = best_fit(Planner(info), machine.plan_request(n_parallel=n_parallel), n_ctx)
    return plan.choice.engine if plan.fits and plan.choice is not None else "llama"


def plan_from_command_line(
    path: str | Path,
    args: argparse.Namespace,
    machine: MachineSnapshot | None = None,
    *,
    err: TextIO,
    remembered: RememberedSettings | None = None,
    speculative: p.SpeculativeParams | None = None,
    n_parallel: int = 1,
) -> LoadDecision | None:
    """The decision to load `path` with, or None after saying why not (on `err`);
    `speculative`'s memory set aside first; `n_parallel` sequences decoded together."""
    machine = machine or snapshot_machine()
    conflict = fill_gpu_conflict(args)
    if conflict:
        print(conflict, file=err)
        return None
    given = chosen_from(args)
    fill = bool(getattr(args, "fill_gpu", False))
    # --fill-gpu asks for the whole card: a remembered choice of the window's would override it
    chosen = given or (None if fill else (remembered or RememberedSettings()).get(path))
    try:
        decision = plan_load(
            path, machine, chosen, siblings=sibling_files(path), speculative=speculative,
            n_parallel=n_parallel,
            fill_gpu=fill,
            projector=getattr(args, "mmproj", None),
        )  # fmt: skip
    except UnusableModelFile as exc:
        print(printable_line(str(exc)), file=err)  # it quotes the file
        return None
    if given is not None and decision.source != PlanSource.CHOSEN:
        what = f"{given.n_ctx:,} tokens, {given.kv_type} KV"
        if given.n_gpu_layers is not None:
            what += f", {given.n_gpu_layers} GPU layers"
        if decision.chosen_over_budget:
            text = f"{Path(path).name} with {what} needs {decision.shortfall_text()} than is free."
        else:  # refused for another reason than memory (an engine that cannot run it here)
            text = " ".join(decision.notes) or f"{Path(path).name} cannot load with {what}."
        if decision.fits:
            text += f" What fits: {decision.summary()} (leave out --ctx/--kv/--gpu-layers)."
        else:
            text += " Nothing fits: " + decision.refusal()
        print(printable_line(text), file=err)
        return None
    if not decision.fits:
        refusal = f"{decision.name} does not fit on this computer. {decision.refusal()}"
        print(printable_line(refusal), file=err)
        return None
    for note in (*machine.helper_problems, *decision.notes):
        print(f"[{printable_line(note)}]", file=err)
    print(f"[{printable_line(decision.name)}: {decision.summary()}]", file=err)
    return decision


def fewer_tokens_hint(
    path: str | Path, machine: MachineSnapshot, *, n_ctx: int, parallel: int
) -> str:
    """After `parallel` requests of `n_ctx` tokens each were refused: suggest fewer requests or
    a shorter context only when that can help, i.e. when the model fits with the load policy's
    smallest setup (MIN_CONTEXT tokens); '' when even that does not fit (the refusal already said
    what would: more memory or a smaller file)."""
    if n_ctx * parallel <= MIN_CONTEXT:
        return ""
    try:
        decision = plan_load(path, machine, RememberedChoice(n_ctx=MIN_CONTEXT))
    except UnusableModelFile:
        return ""
    if not decision.fits:
        return ""
    what = [f"fewer --parallel requests than {parallel}"] if parallel > 1 else []
    if n_ctx > MIN_CONTEXT:
        what.append(f"a shorter --ctx than {n_ctx}")
    return f"Try {' or '.join(what)}." if what else ""


def machine_with_engine(ready: p.Ready | None) -> MachineSnapshot:
    """This machine, with what the started worker said about GPU offload, and the remembered
    helper machines that answer (`hearth hw --host ADDR --remember`)."""
    helpers, problems = probe_helpers()
    return snapshot_machine(
        gpu_offload=None if ready is None else ready.gpu_offload_supported,
        helpers=helpers,
        helper_problems=problems,
    )


class EngineDidNotStart(RuntimeError):
    """The engine process ended before it was ready; the message says how and its last words."""


def machine_after_start(events, timeout_s: float) -> MachineSnapshot:
    """Wait for the started worker's Ready (it says whether this engine can offload to a GPU:
    the plan needs it) and take this machine's snapshot with that. A worker that ends first
    raises EngineDidNotStart (what it printed last is the reason: a missing library, a broken
    build), rather than planning for a load that cannot be sent."""
    from engine.runtime.client import EngineCrashed

    ready = events.wait_for(p.Ready, EngineCrashed, timeout=timeout_s)
    if isinstance(ready, EngineCrashed):
        said = ready.cause_lines or ready.last_lines[-5:]
        how = f"ended (status {ready.exit_code})"
        detail = ("; it said: " + " / ".join(said)) if said else ""
        raise EngineDidNotStart(
            f"The engine process {how} before it was ready{detail}. `hearth hw` shows what "
            "the engine finds; reinstalling the engine (installers/build_engine.py) mends a "
            "broken build."
        )
    return machine_with_engine(ready if isinstance(ready, p.Ready) else None)
