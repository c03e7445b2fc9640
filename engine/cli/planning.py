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
    parser.add_argument(
        "--gpu-layers",
        type=numbers.gpu_layers,
        metavar="N",
        help="layers on the GPU, -1 for all (default: the plan's)",
    )


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
    )


def plan_from_command_line(
    path: str | Path,
    args: argparse.Namespace,
    machine: MachineSnapshot | None = None,
    *,
    err: TextIO,
    remembered: RememberedSettings | None = None,
    speculative: p.SpeculativeParams | None = None,
) -> LoadDecision | None:
    """The decision to load `path` with, or None after saying why not (on `err`);
    `speculative`'s memory set aside first."""
    machine = machine or snapshot_machine()
    given = chosen_from(args)
    chosen = given or (remembered or RememberedSettings()).get(path)
    try:
        decision = plan_load(
            path, machine, chosen, siblings=sibling_files(path), speculative=speculative,
            projector=getattr(args, "mmproj", None),
        )  # fmt: skip
    except UnusableModelFile as exc:
        print(printable_line(str(exc)), file=err)  # it quotes the file
        return None
    if given is not None and decision.source != PlanSource.CHOSEN:
        what = f"{given.n_ctx:,} tokens, {given.kv_type} KV"
        if given.n_gpu_layers is not None:
            what += f", {given.n_gpu_layers} GPU layers"
        text = f"{Path(path).name} with {what} needs {decision.shortfall_text()} than is free."
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


def machine_after_start(events, timeout_s: float) -> MachineSnapshot:
    """Wait for the started worker's Ready (it says whether this engine can offload to a GPU:
    the plan needs it) and take this machine's snapshot with that."""
    from engine.runtime.client import EngineCrashed

    ready = events.wait_for(p.Ready, EngineCrashed, timeout=timeout_s)
    return machine_with_engine(ready if isinstance(ready, p.Ready) else None)
