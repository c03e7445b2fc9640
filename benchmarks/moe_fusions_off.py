"""benchmarks/hearth_speed.py with the MoE decode fusions of docs/kernels-moe.md undone, for
an A/B on one GPU in one device call:

- the FFN norm as a launch of its own, in place of norm_and_route;
- the router's GEMV as a launch of its own (KernelsOps.matmul), then select_and_route, in
  place of route_from_router;
- h quantized by a launch of its own (quantize_activation), then the expert down reading it in
  8 bits, in place of the down rounding h in its own programs.

    python -m benchmarks.moe_fusions_off MODEL.gguf [hearth_speed arguments]

The engine then launches what it did before them (three launches a MoE layer more); every other
kernel is this checkout's.
"""

from __future__ import annotations

import sys


def undo_fusions() -> None:
    import kernels.act_quant
    import kernels.moe_gemv
    from engine.hearth.ops import KernelsOps, TorchOps

    KernelsOps.norm_and_moe_ffn = TorchOps.norm_and_moe_ffn
    KernelsOps.moe_ffn_from_router = TorchOps.moe_ffn_from_router
    down = kernels.moe_gemv.expert_down

    def down_of_8_bit_h(h, w, routing, **kwargs):
        hq = kernels.act_quant.quantize_activation(h.reshape(-1, h.shape[-1]))
        return down(h, w, routing, quantized=hq, **kwargs)

    kernels.moe_gemv.expert_down = down_of_8_bit_h


def main(argv: list[str] | None = None) -> int:
    from benchmarks import hearth_speed

    undo_fusions()
    return hearth_speed.main(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
