"""Planning across helper machines (llama.cpp's RPC backend; engine/hardware/remote.py).

A helper's device is planned exactly as a local device of its backend (its memory model is the
backend's: engine/planner/backends.py); what differs is the network each decoded token crosses,
whose cost the search adds to the bandwidth model's time (engine/planner/remote_link.py).

llama.cpp puts RPC devices before local GPUs in its device list (llama_model_load_from_file:
"add RPC servers at the front of the list"), so helper budgets come first in the request and
their shares first in tensor_split.

    with_helpers(request, hosts) -> PlanRequest
    plan_with_helpers(planner, request, hosts) -> Plan    local first; helpers when they help
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from engine.hardware.remote import RemoteHost
from engine.planner.backends import BACKENDS, DEFAULT_CPU_BANDWIDTH_GBPS
from engine.planner.planner import safety_margin
from engine.planner.records import DeviceBudget, Plan, PlanRequest
from engine.planner.search import SPEED_STEP

# A remote device of unknown kind (a plain rpc-server) is planned with CUDA's memory profile,
# the most cautious.
UNKNOWN_REMOTE_BACKEND = "cuda"


def helper_budgets(
    host: RemoteHost, margin_of: Callable[[int | None], int] | None = None
) -> tuple[DeviceBudget, ...]:
    """A DeviceBudget per device of the helper: its free memory (capped by `hearth host
    --memory-limit`) less the safety margin local devices get."""
    margin_of = margin_of or safety_margin
    out = []
    for device in host.devices:
        backend = device.backend if device.backend in BACKENDS else UNKNOWN_REMOTE_BACKEND
        budget = max(0, device.free_bytes - margin_of(device.total_bytes))
        if device.memory_limit_bytes is not None:
            budget = min(budget, device.memory_limit_bytes)
        bandwidth = device.memory_bandwidth_gbps
        if bandwidth is None and backend == "cpu":
            bandwidth = DEFAULT_CPU_BANDWIDTH_GBPS
        out.append(
            DeviceBudget(
                id=f"rpc:{host.address}:{device.index}",
                name=f"{device.name} on {host.address}",
                backend=backend,
                budget_bytes=budget,
                bandwidth_gbps=bandwidth,
                rpc_server=host.address,
                link_latency_s=host.link.latency_s if host.link else None,
                link_bytes_per_s=host.link.bytes_per_s if host.link else None,
            )
        )
    return tuple(out)


def with_helpers(request: PlanRequest, hosts: Sequence[RemoteHost]) -> PlanRequest:
    """The request with every device of `hosts` before the local GPUs (llama.cpp's order)."""
    remote = tuple(budget for host in hosts for budget in helper_budgets(host))
    local = tuple(g for g in request.gpus if g.rpc_server is None)
    return dataclasses.replace(request, gpus=remote + local)


def plan_with_helpers(planner, request: PlanRequest, hosts: Sequence[RemoteHost]) -> Plan:
    """Best fit across this machine and the helpers (`planner`: an engine.planner.Planner): the
    local plan unless the helpers make the model fit, allow a better file or a longer context
    (what the preference ranks first), or run it faster than keeping layers in this machine's
    RAM (by more than the planner's 3% speed step)."""
    local = planner.plan(request)
    if not hosts:
        return local
    shared = planner.plan(with_helpers(request, hosts))
    names = ", ".join(host.address for host in hosts)
    if not shared.fits:
        return local
    if not local.fits:
        return _noted(shared, f"Uses the helpers ({names}): the model does not fit here alone.")
    bits = {p.source: p.bits_per_weight for p in planner.profiles}
    if _better(shared, local, request.preference, bits):
        return _noted(
            shared,
            f"Uses the helpers ({names}): {_speed(shared)} against {_speed(local)} with "
            "this machine alone.",
        )
    return _noted(
        local,
        f"The helpers ({names}) are not used: this machine alone is as good "
        f"({_speed(local)}; with them {_speed(shared)}).",
    )


def _better(shared: Plan, local: Plan, preference: str, bits: dict[str, float]) -> bool:
    def rank(plan: Plan) -> tuple:
        choice = plan.choice
        quality = round(bits.get(choice.source, 0.0), 2) if choice else 0.0
        ctx = choice.n_ctx if choice else 0
        return {"context": (ctx, quality), "speed": (), "quality": (quality, ctx)}[preference]

    if rank(shared) != rank(local):
        return rank(shared) > rank(local)
    return (shared.tokens_per_second or 0.0) > (local.tokens_per_second or 0.0) * SPEED_STEP


def _speed(plan: Plan) -> str:
    tps = plan.tokens_per_second
    return "speed unknown" if tps is None else f"about {tps:.1f} tokens/s"


def _noted(plan: Plan, note: str) -> Plan:
    return dataclasses.replace(plan, notes=(*plan.notes, note))
