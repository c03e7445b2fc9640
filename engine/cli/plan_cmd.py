"""`hearth plan MODEL [MODEL...] [--vram GB] [--ctx N] [--host ADDR]`: how a model would fit,
without loading it (with --host, across helper machines too: docs/multi-machine.md).

Each MODEL is a local .gguf or hf://OWNER/REPO/FILE.gguf (read with ranged requests, header
only); several MODELs are candidate files of one model (quantizations) to choose among. The
devices are detected with their free memory now (the GPUs' less a safety margin, and the free
RAM), or, with --vram, one CUDA GPU with that much free memory is assumed (to plan for another
card) beside this machine's free RAM, and --ram sets the RAM. The smallest setup tried is the
load policy's (engine.session.MIN_CONTEXT tokens), the one the window, `chat` and `serve` use.
When nothing fits, the other files of the same model beside a local MODEL that would fit are
named. --engine picks the engine (auto: llama.cpp unless the measured
figures favour the Hearth engine on this GPU, saying why; hearth: the Hearth engine alone, with
its own K/V formats, for the first MODEL). Exit status: 0 when the plan fits, 1 when nothing
fits (the nearest options are printed), 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from engine.cli import numbers, remote_cmd
from engine.cli.info_cmd import read
from engine.cli.planning import add_fill_gpu_argument
from engine.enums import KV_TYPES, Engine
from engine.gguf import GGUFError
from engine.planner import DeviceBudget, Plan, Planner, PlanRequest, safety_margin
from engine.planner.engine_choice import ENGINES, engine_name, plan_engines
from engine.planner.fill_gpu import fill_request
from engine.planner.records import PREFERENCES, cpu_share_text
from engine.planner.remote import plan_with_helpers
from engine.session.load_policy import MIN_CONTEXT, same_model, sibling_files
from engine.untrusted_text import printable_line

GIB = 1024**3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "models", nargs="+", metavar="MODEL", help=".gguf path or hf://OWNER/REPO/FILE"
    )
    gib = numbers.float_in_range(0.0, numbers.MAX_MEMORY_GIB)
    parser.add_argument("--vram", type=gib, metavar="GB", help="plan for one GPU with GB GiB free")
    parser.add_argument("--ram", type=gib, metavar="GB", help="system RAM the plan may use (GiB)")
    ctx = numbers.context_tokens
    parser.add_argument("--ctx", type=ctx, metavar="N", help="target context (tokens)")
    parser.add_argument(
        "--min-ctx", type=ctx, default=MIN_CONTEXT, metavar="N",
        help="minimum context (default: %(default)s, as the window, chat and serve)",
    )  # fmt: skip
    parser.add_argument("--prefer", choices=PREFERENCES, default="quality")
    parser.add_argument(
        "--kv",
        type=kv_type_list,
        default=",".join(KV_TYPES),
        help="allowed KV cache types, comma-separated (default: %(default)s)",
    )
    parser.add_argument("--flash-attn", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--backend", default="cuda", help="backend assumed with --vram")
    parser.add_argument(
        "--bandwidth",
        type=numbers.float_in_range(1.0, 100_000.0),
        metavar="GB/s",
        help="GPU bandwidth with --vram",
    )
    parser.add_argument(
        "--compute-capability", metavar="X.Y", help="NVIDIA compute capability with --vram"
    )
    parser.add_argument(
        "--engine", choices=ENGINES, default="auto",
        help="llama (llama.cpp), hearth (the Hearth engine) or auto (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="ADDR",
        help="a helper machine running `hearth host` whose devices the plan may use; repeat",
    )
    add_fill_gpu_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--load",
        action="store_true",
        help="load the model as planned and print what llama.cpp really allocated",
    )


def kv_type_list(text: str) -> str:
    """A comma-separated list of KV cache types, each one the planner knows."""
    names = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [n for n in names if n not in KV_TYPES]
    if not names or unknown:
        shown = printable_line(", ".join(unknown))[:80] if unknown else "none"
        raise argparse.ArgumentTypeError(
            f"unknown KV cache type ({shown}); use one or more of {', '.join(KV_TYPES)}"
        )
    return ",".join(names)


def build_request(args: argparse.Namespace) -> PlanRequest:
    options: dict = {
        "target_ctx": args.ctx,
        "min_ctx": args.min_ctx,
        "preference": args.prefer,
        "kv_types": tuple(k.strip() for k in args.kv.split(",") if k.strip()),
        "flash_attn": args.flash_attn,
    }
    if args.ram is not None:
        options["host_budget_bytes"] = int(args.ram * GIB)
    if args.vram is not None:
        free = int(args.vram * GIB)
        budget = max(0, free - safety_margin(free))
        gpu = DeviceBudget(
            "gpu0", f"{args.vram:g} GiB GPU", args.backend, budget, args.bandwidth,
            args.compute_capability,
        )  # fmt: skip
        if args.ram is None:
            # The layers that do not fit on the card go to RAM: without --ram, this machine's
            # free RAM bounds them (a 70B must not "fit" on a 24 GiB machine beside an 8 GiB card).
            host = this_machine().plan_request()
            options["host_budget_bytes"] = host.host_budget_bytes
            options["host_bandwidth_gbps"] = host.host_bandwidth_gbps
        return PlanRequest(gpus=(gpu,), **options)
    # This machine as it is now: the GPUs' free memory and the free RAM (the same question the
    # window asks; --ram and --vram override it for planning another machine).
    return this_machine().plan_request(**options)


def this_machine():
    from engine.session import snapshot_machine

    return snapshot_machine()


def run(args: argparse.Namespace) -> int:
    infos = []
    for model in args.models:
        try:
            infos.append(read(model))
        except GGUFError as exc:
            print(f"hearth plan: {printable_line(exc.user_message(model))}", file=sys.stderr)
            return 2
        except ValueError as exc:
            print(f"hearth plan: {printable_line(str(exc))}", file=sys.stderr)
            return 2
    if args.fill_gpu and args.ctx is not None:
        print("hearth plan: --fill-gpu chooses the context itself; leave out --ctx.",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        request = build_request(args)
    except ValueError as exc:
        print(f"hearth plan: {exc}", file=sys.stderr)
        return 2
    if args.fill_gpu:
        request = fill_request(request, infos[0].context_length)
    probed = remote_cmd.probe_helpers(args.host)
    for _, found in probed:
        if isinstance(found, str):
            print(f"hearth plan: {printable_line(found)}", file=sys.stderr)
            return 2
    planner = Planner(infos)
    helpers = plan_with_helpers(planner, request, remote_cmd.reachable(probed))
    result = plan_engines(planner, request, args.engine, llama=helpers)
    smaller = [] if result.fits else fitting_siblings(args.models, infos, request, args.engine)
    if args.json:
        data = result.to_dict()
        data["other_files_that_fit"] = [{"path": path, "plan": text} for path, text in smaller]
        json.dump(data, sys.stdout, indent=2)
        print()
    else:
        print_plan(result, sys.stdout)
        if smaller:
            sys.stdout.write("\nother files of this model beside it that fit:\n")
            for path, text in smaller:
                sys.stdout.write(f"  - {printable_line(path)}: {printable_line(text)}\n")
    if args.load and result.fits and result.settings is not None:
        from engine.cli.plan_apply import load_and_report

        return load_and_report(result, sys.stdout)
    return 0 if result.fits else 1


def fitting_siblings(models, infos, request: PlanRequest, engine: str) -> list[tuple[str, str]]:
    """(path, plan summary) for each other quantization of the model beside a single local
    MODEL that fits `request`, as the window's refusal offers them (engine.session.sibling_files).
    """
    if len(models) != 1 or models[0].startswith("hf://"):
        return []
    found = []
    for other in sibling_files(models[0]):
        try:
            other_info = read(str(other))
        except (GGUFError, ValueError, OSError):
            continue
        if not same_model(infos[0], other_info):
            continue
        plan = plan_engines(Planner([other_info]), request, engine)
        if plan.fits and plan.choice is not None:
            c = plan.choice
            found.append((str(other), f"{c.n_ctx} tokens, {c.offload_summary}"))
    return found


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f}"


def print_plan(result: Plan, out: TextIO) -> None:
    c = result.choice
    if c is not None:
        fa = "on" if c.flash_attn else "off"
        how = Engine.HEARTH.display_name if c.engine == Engine.HEARTH else f"flash attention {fa}"
        out.write(f"Plan: {c.quant}, {c.n_ctx} tokens, KV {c.type_k}/{c.type_v}, {how}\n")
        out.write(f"      {c.offload_summary}  ({c.source})\n")
    else:
        out.write("Plan: nothing fits\n")
    out.write(f"status: {result.status}, confidence: {result.confidence}\n")
    if c is not None:
        out.write(f"engine: {engine_name(c.engine)}\n")
    if result.tokens_per_second is not None:
        out.write(f"predicted decode speed: {result.tokens_per_second:.1f} tokens/s\n")
    if result.devices:
        # wide enough for a helper machine's device ("CUDA0 on 192.168.1.20:50052")
        width = min(40, max(18, *(len(d.name) for d in result.devices)))
        out.write(
            f"\n  {'GiB':<{width}}   weights      KV  compute overhead   total  budget    free\n"
        )
        for d in result.devices:
            out.write(
                f"  {d.name[:width]:<{width}} {_gib(d.weights_bytes):>9} {_gib(d.kv_bytes):>7} "
                f"{_gib(d.compute_bytes):>8} {_gib(d.overhead_bytes):>8} {_gib(d.total_bytes):>7} "
                f"{_gib(d.budget_bytes):>7} {_gib(d.free_bytes):>7}\n"
            )
    if result.reasons:
        out.write("\nwhy:\n")
        for reason in result.reasons:
            out.write(f"  - {printable_line(reason)}\n")
    if result.alternatives:
        out.write("\nnearest options:\n")
        for alt in result.alternatives:
            out.write(f"  - {printable_line(alt.summary)}\n")
    if result.notes:
        out.write("\nnotes:\n")
        for note in result.notes:
            out.write(f"  - {printable_line(note)}\n")
    if result.settings is not None:
        s = result.settings
        out.write(
            f"\nload with: n_ctx={s.n_ctx} n_gpu_layers={s.n_gpu_layers} flash_attn={s.flash_attn} "
            f"type_k={s.type_k} type_v={s.type_v} n_ubatch={s.n_ubatch} swa_full={s.swa_full} "
            f"engine={s.engine}\n"
        )
        if s.ram_expert_layers:
            if s.expert_cache_slots:
                how = f"{s.expert_cache_slots} cached on the GPU per layer"
            else:  # every pick by the CPU, a split with the copy engine, or read in place
                used = result.choice.n_expert_used if result.choice is not None else 0
                how = cpu_share_text(s.expert_cpu_picks, used)
            out.write(f"  experts in RAM: the last {s.ram_expert_layers} layers', {how}\n")
        for pattern, buft in s.tensor_buft_overrides:
            out.write(f"  override: {pattern} -> {buft}\n")
        if s.tensor_split:
            out.write(f"  tensor_split: {', '.join(f'{x:g}' for x in s.tensor_split)}\n")
