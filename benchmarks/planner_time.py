"""How long a plan takes: the GUI recomputes one while a slider moves, so it must stay well under
a frame or two (the aim: a few tens of milliseconds on a desktop).

    python -m benchmarks.planner_time

The hardest case planned here: five quantizations of a 48-layer MoE model (about a hundred
offload levels each) on an 8 GB card with host memory limited too; beside it, one dense file.
A figure, not a test: timing assertions fail on busy machines for reasons that are not the
planner's.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from engine.gguf import read_model_info
from engine.planner import DeviceBudget, Planner, PlanRequest
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

GIB = 1024**3
QUANTS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M")


def gpu(gib: float) -> DeviceBudget:
    return DeviceBudget("gpu0", f"{gib:g} GiB card", "cuda", int(gib * GIB), 500.0)


def request(*gpus: DeviceBudget, **options) -> PlanRequest:
    options.setdefault("host_budget_bytes", 64 * GIB)
    return PlanRequest(gpus=tuple(gpus), **options)


def _timed(planner: Planner, req) -> float:
    started = time.perf_counter()
    planner.plan(req)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:

        def info(shape: str, quant: str):
            path = Path(tmp) / f"{shape}-{quant}.gguf"
            write_sparse_gguf(str(path), SHAPES[shape], quant)
            return read_model_info(str(path))

        planner = Planner([info("qwen3-30b-a3b", q) for q in QUANTS])
        req = request(gpu(8), host_budget_bytes=32 * GIB, target_ctx=32768)
        first = _timed(planner, req)
        times = [_timed(planner, req) for _ in range(7)]
        single = Planner(info("llama3-8b", "Q4_K_M"))
        one_file = statistics.median(
            _timed(single, request(gpu(8), target_ctx=32768)) for _ in range(7)
        )
    print(
        f"plan time: 5 MoE files first {first:.1f} ms, median {statistics.median(times):.1f} ms;"
        f" one dense file median {one_file:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
