"""python -m benchmarks.kernels [--list] [--ops A,B] [--json PATH] ...: see __init__.py."""

from __future__ import annotations

import argparse
import sys

from benchmarks.kernels.cases import CONTEXTS, KV_PAIRS, LLAMA3_8B, OPS, listing


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels")
    parser.add_argument("--list", action="store_true", help="the ops, references, tests; no GPU")
    parser.add_argument("--ops", help="only these ops, comma-separated (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer shapes (a first look)")
    parser.add_argument("--formats", help="GEMV formats, e.g. Q4_K,Q6_K (default: all)")
    parser.add_argument("--batches", default="1,16", help="GEMV input rows, e.g. 1,16")
    parser.add_argument("--contexts", default=",".join(map(str, CONTEXTS)),
                        help="decode attention depths")  # fmt: skip
    parser.add_argument("--pairs", help="K/V formats, e.g. f16/f16,rot4/rot4 (default: all)")
    parser.add_argument("--attention-sweep", type=int, metavar="CONTEXT",
                        help="also decode attention's launch shapes at this depth")  # fmt: skip
    parser.add_argument("--sweep-pages", type=int, nargs="*", default=[],
                        help="with --attention-sweep: page sizes too, e.g. 32 128")  # fmt: skip
    parser.add_argument("--window", type=int, default=0, help="attention with a sliding window")
    parser.add_argument("--json", help="write every row here")
    return parser


def _measure(args, copy_bw: float) -> list:
    """Every asked-for op's rows, printed op by op; an op that fails is reported and the next
    one goes on (a run cut by its time limit keeps what it measured)."""
    from benchmarks.kernels import attention, elementwise, gemv
    from benchmarks.kernels.cases import DEQUANT_FORMATS, GEMV_FORMATS
    from benchmarks.kernels.results import table

    wanted = set(args.ops.split(",")) if args.ops else {op.name for op in OPS}
    shapes = LLAMA3_8B[:1] + LLAMA3_8B[2:3] if args.quick else LLAMA3_8B
    formats = args.formats.split(",") if args.formats else GEMV_FORMATS
    batches = [int(b) for b in args.batches.split(",")]
    pairs = [tuple(p.split("/")) for p in args.pairs.split(",")] if args.pairs else KV_PAIRS
    contexts = [int(c) for c in args.contexts.split(",")]
    jobs = []
    if "quant_matmul" in wanted:
        jobs += [(gemv.quant_matmul_rows, (f, n, k, b, copy_bw))
                 for f in formats for _, n, k in shapes for b in batches]  # fmt: skip
        jobs += [(gemv.cublas_rows, (n, k, 1, copy_bw)) for _, n, k in shapes]
    if "quantize_activation" in wanted:
        jobs += [(gemv.quantize_activation_rows, (k, copy_bw)) for k in (4096, 14336)]
    if "dequantize" in wanted:
        jobs += [(gemv.dequantize_rows, (f, n, k, copy_bw))
                 for f in DEQUANT_FORMATS for _, n, k in shapes]  # fmt: skip
    for op, fn in (("rms_norm", elementwise.norm_rows), ("swiglu", elementwise.swiglu_rows),
                   ("apply_rope", elementwise.rope_rows)):  # fmt: skip
        if op in wanted or f"{op}_quantized" in wanted:
            jobs += [(fn, (rows, copy_bw)) for rows in elementwise.ROWS]
    if "kv_write" in wanted or "kv_write_rope" in wanted:
        jobs += [(attention.write_rows, (k, v, copy_bw)) for k, v in pairs]
    if "kv_gather" in wanted:
        jobs += [(attention.gather_rows, (k, v, copy_bw)) for k, v in pairs]
    if "decode_attention" in wanted:
        jobs += [(attention.attention_rows, (k, v, c, copy_bw), {"window": args.window})
                 for c in contexts for k, v in pairs]  # fmt: skip
        if args.attention_sweep:
            tunings = tuple(attention.sweep_tunings())
            jobs += [(attention.attention_rows, (k, v, args.attention_sweep, copy_bw),
                      {"tunings": tunings}) for k, v in pairs]  # fmt: skip
            jobs += [(attention.attention_rows, (k, v, args.attention_sweep, copy_bw),
                      {"page_size": p}) for k, v in pairs for p in args.sweep_pages]  # fmt: skip
    rows = []
    for fn, fn_args, *kwargs in jobs:
        try:
            found = fn(*fn_args, **(kwargs[0] if kwargs else {}))
        except Exception as error:  # report it and go on to the next figure
            print(f"{fn.__name__}{fn_args[:-1]}: failed: {error!r}"[:300], flush=True)
            continue
        if found:  # the rows as measured (a run cut by its time limit keeps what it printed)
            print(table(found).split("\n", 1)[1], flush=True)
        rows += found
    return rows


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        print(listing())
        return 0
    import torch

    from benchmarks.kernels.results import table, write_json
    from benchmarks.kernels.timing import copy_bandwidth

    if not torch.cuda.is_available():
        print("needs a CUDA GPU (--list runs without one)", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    copy_bw = copy_bandwidth()
    print(f"device: {device}; device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    rows = _measure(args, copy_bw)
    print("\n" + table(rows))
    if args.json:
        write_json(rows, args.json, device=device, copy_gb_s=copy_bw / 1e9)
    return 0


if __name__ == "__main__":
    sys.exit(main())
