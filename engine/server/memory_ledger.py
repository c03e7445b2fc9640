"""Which loaded models must go for another to fit: the server's memory ledger. Pure.

Each model's need is what the planner predicted for it, device by device (its plan's weights,
KV cache, compute buffers and overhead), and the budgets are what the plan request gives each
device on this machine. Models stay loaded together while the sum of their needs fits every
device's budget; when a new model needs room, the least recently used idle models are unloaded
until it fits. A model answering a request is never unloaded for another.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from engine.units import format_bytes

Need = Mapping[str, int]  # device id ("host" for system RAM) -> bytes
Budgets = Mapping[str, int | None]  # device id -> bytes a plan may take (None: not checked)


def over_budget(needs: Sequence[Need], budgets: Budgets) -> dict[str, int]:
    """Bytes over the budget on each device the needs together do not fit ({} when they do)."""
    totals: dict[str, int] = {}
    for need in needs:
        for device, n in need.items():
            totals[device] = totals.get(device, 0) + n
    over = {}
    for device, total in totals.items():
        budget = budgets.get(device)
        if budget is not None and total > budget:
            over[device] = total - budget
    return over


def models_to_unload(
    loaded: Sequence[tuple[Hashable, Need, bool]], new: Need, budgets: Budgets
) -> list[Hashable] | None:
    """`loaded`: (key, need, busy) from least to most recently used. The fewest of the least
    recently used idle models whose unloading lets `new` fit ([] when it fits beside them all);
    None when it does not fit even with every idle model gone (busy ones stay)."""
    kept = list(loaded)
    gone: list[Hashable] = []
    while over_budget([*(need for _, need, _ in kept), new], budgets):
        idle = next((entry for entry in kept if not entry[2]), None)
        if idle is None:
            return None
        kept.remove(idle)
        gone.append(idle[0])
    return gone


def shortfall_text(over: Mapping[str, int], names: Mapping[str, str] | None = None) -> str:
    """ "0.31 GiB more on host" for each device over its budget."""
    names = names or {}
    return ", ".join(f"{format_bytes(n, 2)} more on {names.get(d, d)}" for d, n in over.items())
