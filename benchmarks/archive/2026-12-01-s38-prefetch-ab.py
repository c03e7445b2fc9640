"""A MoE decode step with the expert weights brought into L2 ahead of the kernels that read
them (kernels/l2_prefetch.py at commit 4c5a794, deleted after it lost) against without, in one process (session 29's
step A/B: graph replays of a step, a trace of 4 replays in the first round):

    python benchmarks/archive/2026-12-01-s38-prefetch-ab.py MODEL OUTDIR \
        --variants main no-after none --rounds 2

main       the gate/up brings the down's picked experts into L2, the down the next layer's
           attention projections (MoeBlock.l2_after)
no-after   the gate/up's prefetch only
none       neither (the step as before)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "step_ab", Path(__file__).with_name("2026-11-30-s29-step-ab.py")
)
step_ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(step_ab)

from kernels import moe_gemv  # noqa: E402

_models: list = []
_load = step_ab.Transformer.load
_planes = moe_gemv.down_prefetch_planes
_after: dict = {}


def _capturing_load(*args, **kwargs):
    model = _load(*args, **kwargs)
    _models.append(model)
    for i, layer in enumerate(model.layers):
        if layer.moe is not None:
            _after[i] = layer.moe.l2_after
    print(
        "layers bringing the next weights into L2:",
        sum(v is not None for v in _after.values()),
        "of",
        len(_after),
        flush=True,
    )
    return model


step_ab.Transformer.load = _capturing_load


def _variant(gate_up: bool, down: bool):
    def setup(cache) -> None:
        moe_gemv.down_prefetch_planes = _planes if gate_up else (lambda *a, **k: None)
        for i, layer in enumerate(_models[0].layers):
            if layer.moe is not None:
                layer.moe.l2_after = _after[i] if down else None

    return setup


step_ab.VARIANTS.update(
    {
        "main": _variant(True, True),
        "no-after": _variant(True, False),
        "none": _variant(False, False),
    }
)

if __name__ == "__main__":
    step_ab.main()
