"""How many requests can decode together: the most parallel sequences whose KV cache (each with
its own context) the planner finds room for on this machine, beside the model's weights."""

from __future__ import annotations

from pathlib import Path

from engine.enums import KVType
from engine.session import MachineSnapshot, PlanSource, RememberedChoice, plan_load
from engine.session.model_file import check_model_file

MAX_PARALLEL = 64


def parallel_that_fit(
    path: str | Path,
    machine: MachineSnapshot,
    per_request_ctx: int,
    kv_type: str = KVType.F16,
    limit: int = MAX_PARALLEL,
    engine: str = "llama",
    type_v: str | None = None,
) -> int:
    """The largest n <= limit for which n x per_request_ctx tokens of cache fit (0: not even
    one) on `engine` (the Hearth engine counts each sequence's pages and decode row). The
    planner's memory model is monotonic in the context, so a bisection finds it."""
    info = check_model_file(path)

    def fits(n: int) -> bool:
        chosen = RememberedChoice(
            n_ctx=per_request_ctx * n, kv_type=kv_type, engine=engine, type_v=type_v
        )
        decision = plan_load(path, machine, chosen, info=info, n_parallel=max(1, n))
        return decision.source == PlanSource.CHOSEN

    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
