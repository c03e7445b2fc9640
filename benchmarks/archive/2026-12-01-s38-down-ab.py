"""A one-token MoE step's expert down reading h already in 8 bits (act_quant's
quantize_activation launched between the gate/up and the down, which lets the down in
early), at several launch shapes, against main's down rounding all of h in every program; in
one process (session 29's step A/B: graph replays, a trace of the first round's replays):

    python benchmarks/archive/2026-12-01-s38-down-ab.py MODEL OUTDIR \
        --variants main q8-16x8 q8-8x4 q8-4x4 q8-4x2 --rounds 2

main        moe_one_token.py's down at 16 rows x 8 warps, h in float (rounded in each program)
q8-RxW      h rounded once by its own launch, the down at R rows of each slot x W warps
dense-RxW   h rounded once by its own launch, kernels/moe_down_dp4a.py's down (one integer
            GEMV over the k experts' rows side by side) at R output rows x W warps a program
pdl-RxW     dense-RxW with h's launch a dependent of the gate/up's (launch_pdl, waiting
            in-kernel), so the whole chain is dependent launches
noq-RxW     for timing only: dense-RxW reading one 8-bit h made at the first call, with no
            rounding launch (what the step would take were h rounded for free)

Once moe_down_dp4a.py's down became expert_down's default (two chunks of super-blocks, h's
launch a dependent one), main is that down at dense_down_config and:
slots       expert_down(dense=False): moe_one_token.py's down, the step as before (since
            call 7 with late's gate/up)
d-RxW       main's down at R output rows x W warps a program
early       main with the one-token gate/up letting the next launch in as each program
            starts (MoeGemvConfig.early_next), so that h's rounding and the down's programs
            start beside the gate/up's last ones

Once early_next became expert_gate_up's default before that down (`then`), main is that and:
late        expert_gate_up without `then`: the gate/up letting the next launch in once its
            dot products are done (call 6's main)

Every variant's setup first puts back the three functions the others replace (call 6's
"slots" row did not: it ran with early's gate/up).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "step_ab", Path(__file__).with_name("2026-11-30-s29-step-ab.py")
)
step_ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(step_ab)

from kernels import moe_down_dp4a, moe_gemv  # noqa: E402
from kernels.act_quant import quantize_activation  # noqa: E402

_down = moe_gemv.expert_down
_gate_up = moe_gemv.expert_gate_up
_default_config = moe_gemv.default_config


def _restore() -> None:
    moe_gemv.expert_down = _down
    moe_gemv.expert_gate_up = _gate_up
    moe_gemv.default_config = _default_config


def _variant(rows: int, warps: int):
    def down(h, w, routing, **kwargs):
        if routing.n_tokens == 1 and not w.in_host_memory:
            kwargs["quantized"] = quantize_activation(h.reshape(-1, h.shape[-1]),
                                                      let_next_start=True)  # fmt: skip
            kwargs["config"] = moe_gemv.MoeGemvConfig(block_n=rows, num_warps=warps)
        return _down(h, w, routing, **kwargs)

    def setup(cache) -> None:
        _restore()
        moe_gemv.expert_down = down if rows else _down

    return setup


_stale: list = []


def _dense(rows: int, warps: int, chained: bool = False, free: bool = False):
    def down(h, w, routing, **kwargs):
        if routing.n_tokens == 1 and moe_down_dp4a.takes(w.fmt, w.n_in):
            if free and _stale:
                hq = _stale[0]
            else:
                hq = quantize_activation(h.reshape(1, -1), let_next_start=True,
                                         after_prior=chained)  # fmt: skip
                if free:
                    _stale.append(hq)
            return moe_down_dp4a.launch_down(hq, w, routing, h.dtype, rows, warps, True, True)
        return _down(h, w, routing, **kwargs)

    def setup(cache) -> None:
        _restore()
        moe_gemv.expert_down = down

    return setup


def _late(cache) -> None:
    _restore()

    def gate_up(*args, then=None, **kwargs):
        return _gate_up(*args, **kwargs)

    moe_gemv.expert_gate_up = gate_up


def _configured(rows: int, warps: int, dense: bool = True):
    def down(h, w, routing, **kwargs):
        if rows:
            kwargs["config"] = moe_gemv.MoeGemvConfig(block_n=rows, num_warps=warps)
        return _down(h, w, routing, dense=dense, **kwargs)

    def setup(cache) -> None:
        if dense:
            _restore()
        else:  # the step before: the gate/up lets the down in once its products are done
            _late(cache)
        moe_gemv.expert_down = down

    return setup


def _early(on: bool):
    def config(fmt, mode, one_token=False):
        made = _default_config(fmt, mode, one_token)
        if on and one_token and mode == moe_gemv.GATE_UP:
            made = moe_gemv.MoeGemvConfig(made.block_n, made.max_runs, made.num_warps,
                                          made.pdl, early_next=True)  # fmt: skip
        return made

    def setup(cache) -> None:
        _restore()
        moe_gemv.default_config = config

    return setup


step_ab.VARIANTS["late"] = _late
step_ab.VARIANTS["early"] = _early(True)
step_ab.VARIANTS["slots"] = _configured(0, 0, dense=False)
for rows, warps in ((2, 2), (4, 2), (8, 4), (8, 8)):
    step_ab.VARIANTS[f"d-{rows}x{warps}"] = _configured(rows, warps)
step_ab.VARIANTS.update({"main": _variant(0, 0)})
for rows, warps in ((1, 2), (2, 2), (4, 2), (4, 4), (8, 4)):
    step_ab.VARIANTS[f"dense-{rows}x{warps}"] = _dense(rows, warps)
    step_ab.VARIANTS[f"pdl-{rows}x{warps}"] = _dense(rows, warps, chained=True)
    step_ab.VARIANTS[f"noq-{rows}x{warps}"] = _dense(rows, warps, free=True)
for rows, warps in ((16, 8), (8, 8), (8, 4), (4, 4), (4, 2), (2, 2)):
    step_ab.VARIANTS[f"q8-{rows}x{warps}"] = _variant(rows, warps)

if __name__ == "__main__":
    step_ab.main()
