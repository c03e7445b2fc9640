"""python -m benchmarks.kernels [--sweep] [--quick] [--json PATH]: see __init__.py."""

from __future__ import annotations

import argparse
import json
import sys

import torch

from benchmarks.kernels import attention, gemv
from benchmarks.kernels.timing import copy_bandwidth


def _gemv_table(rows: list[dict]) -> None:
    print(f"{'format':20} {'shape':>12} {'rows':>4} {'us':>8} {'GB/s':>7} {'of copy':>8}"
          f"  {'x in 8 bits: us':>15} {'of copy':>8}")  # fmt: skip
    for r in rows:
        shape = f"{r['n_out']}x{r['n_in']}"
        engine = r.get("x_in_8_bits")
        shared = f"  {engine['us']:15.1f} {engine['of_copy']:8.1%}" if engine else ""
        print(f"{r['format']:20} {shape:>12} {r['rows']:>4} {r['us']:8.1f} {r['gb_s']:7.0f} "
              f"{r['of_copy']:8.1%}{shared}")  # fmt: skip


def _attention_table(rows: list[dict], tuning: bool = False) -> None:
    print(f"{'K/V':10} {'context':>8} {'us/layer':>9} {'ms/token x32':>12} {'GB/s':>7} "
          f"{'of copy':>8} {'vs f16':>7}" + ("  launch" if tuning else ""))  # fmt: skip
    f16 = {}
    for r in rows:  # the f16 figure of the same context (and launch shape, in a sweep)
        if r["k"] == r["v"] == "f16":
            f16.setdefault((r["context"], str(r["tuning"]) if tuning else ""), r["us_per_layer"])
    for r in rows:
        key = (r["context"], str(r["tuning"]) if tuning else "")
        speedup = f16.get(key, float("nan")) / r["us_per_layer"]
        t = r["tuning"]
        launch = f"  {attention.launch_label(t)}" if tuning else ""
        if not tuning:  # a flag timed beside the default (--flag)
            launch = attention.flags_label(t)
        if tuning and r["page_size"] != 64:
            launch += f", pages of {r['page_size']}"
        print(f"{r['k'] + '/' + r['v']:10} {r['context']:>8} {r['us_per_layer']:9.1f} "
              f"{r['ms_per_token_32_layers']:12.3f} {r['gb_s']:7.0f} {r['of_copy']:8.1%} "
              f"{speedup:6.2f}x{launch}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels")
    parser.add_argument("--sweep", action="store_true", help="try GEMV tile shapes too")
    parser.add_argument("--quick", action="store_true", help="fewer shapes (a first look)")
    parser.add_argument("--no-attention", action="store_true")
    parser.add_argument("--no-gemv", action="store_true")
    parser.add_argument("--variants", action="store_true", help="only the batch-1 GEMV variants")
    parser.add_argument("--variant-names", help="with --variants: only these, comma-separated")
    parser.add_argument("--formats", help="GEMV formats, e.g. Q4_K,Q6_K (default: all)")
    parser.add_argument("--batches", default="1,4,16", help="GEMV input rows, e.g. 1,16")
    parser.add_argument("--contexts", default="4096,32768,131072", help="attention contexts")
    parser.add_argument("--pairs", help="K/V formats, e.g. f16/f16,rot4/rot4 (default: all)")
    parser.add_argument("--attention-sweep", help="launch shapes of attention at this context")
    parser.add_argument("--sweep-pages", type=int, nargs="*", default=[],
                        help="with --attention-sweep: page sizes too, e.g. 32 128")  # fmt: skip
    parser.add_argument("--window", type=int, default=0, help="attention with a sliding window")
    parser.add_argument("--no-write", action="store_true", help="skip the KV write figures")
    parser.add_argument("--flag", action="append", choices=attention.FLAGS,
                        help="an AttentionTuning flag timed on between timings of the default "
                        "in the attention table (repeat for several)")  # fmt: skip
    parser.add_argument("--programs-per-sm", type=int, default=None,
                        help="AttentionTuning.programs_per_sm of the attention table's "
                        "default and of its --flag timings (0: as many as fit)")  # fmt: skip
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    copy_bw = copy_bandwidth()
    print(f"device: {device}; device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    report: dict = {"device": device, "copy_gb_s": copy_bw / 1e9}

    if args.variants:
        formats = args.formats.split(",") if args.formats else ["Q4_K", "Q6_K"]
        names = args.variant_names.split(",") if args.variant_names else None
        rows = []
        print("\nGEMV variants (weights + x + y bytes over time; 1 row unless named)")
        print(f"{'format':6} {'variant':24} {'shape':>12} {'us':>8} {'GB/s':>7} {'of copy':>8}")
        for fmt in formats:
            for _name, n_out, n_in in gemv.LLAMA3_8B:
                rows += gemv.variants(fmt, n_out, n_in, copy_bw, names)
        quant = {k: gemv.activation_quantize_us(k) for k in (4096, 14336)}
        print("quantize_activation alone, 1 row: " + ", ".join(
            f"K={k}: {us:.1f} us" for k, us in quant.items()))  # fmt: skip
        report["variants"] = rows
        report["quantize_us"] = quant
        args.no_gemv = args.no_attention = True

    if not args.no_gemv:
        shapes = gemv.LLAMA3_8B[:1] + gemv.LLAMA3_8B[2:3] if args.quick else gemv.LLAMA3_8B
        batches = [int(b) for b in args.batches.split(",")]
        formats = args.formats.split(",") if args.formats else gemv.FORMATS
        rows = []
        for fmt in formats:
            for _name, n_out, n_in in shapes:
                for b in batches:
                    row = gemv.measure(fmt, n_out, n_in, b, copy_bw)
                    if gemv.takes_8_bit_x(fmt, b):  # as the engine runs it, beside
                        shared = gemv.measure(fmt, n_out, n_in, b, copy_bw, share_x=True)
                        row["x_in_8_bits"] = {k: shared[k] for k in ("us", "gb_s", "of_copy")}
                    rows.append(row)
        for _name, n_out, n_in in shapes:
            rows.append(gemv.cublas_f16(n_out, n_in, 1, copy_bw))
        print(
            "\nGEMV (weights + x + y bytes over time; GGUF bytes, unchanged by the planes); "
            "each call quantizes its own x,\nand where the engine gives x in 8 bits (the RMSNorm "
            "writes it, or one quantization serves the matrices that read it)\nthat figure "
            "beside: the GEMV as the engine runs it, chained to the launch before"
        )
        _gemv_table(rows)
        report["gemv"] = rows
        if args.sweep:
            report["sweep"] = {}
            targets = [(f, s) for f in ("Q4_K", "Q6_K") for s in gemv.LLAMA3_8B]
            targets += [(f, s) for f in ("Q8_0", "Q4_1") for s in gemv.LLAMA3_8B[::2]]
            targets = [(f, s) for f, s in targets if f in formats and s in shapes]
            for fmt, (_name, n_out, n_in) in targets:
                found = gemv.sweep(fmt, n_out, n_in, copy_bw)
                report["sweep"][f"{fmt} {n_out}x{n_in}"] = found
                print(f"\nsweep {fmt} {n_out}x{n_in}, best 3:")
                for r in found[:3]:
                    print(f"  {r['config']}  {r['us']:.1f} us  {r['of_copy']:.1%}")

    if not args.no_attention:
        contexts = [int(c) for c in args.contexts.split(",")]
        pairs = attention.FORMAT_PAIRS
        if args.pairs:
            pairs = [tuple(p.split("/")) for p in args.pairs.split(",")]
        rows = []
        for context in contexts:
            for k, v in pairs:
                tunings = attention.flag_comparison(k, args.flag or [], v)
                base = None
                if args.programs_per_sm is not None:
                    base = attention.AttentionTuning(programs_per_sm=args.programs_per_sm)
                try:
                    rows += attention.measure(
                        k, v, context, copy_bw, tunings=tunings, window=args.window, base=base
                    )
                except Exception as error:  # report it and go on to the next figure
                    print(f"attention {k}/{v} at {context}: failed: {error!r}"[:300])
        if "q_prepared" in (args.flag or []):
            rope_q = attention.measure_rope_q()
            print(f"\nRoPE on one token's q (32 heads of 128), per launch: plain "
                  f"{rope_q['us_plain']:.1f} us, with the rot4 query preparation "
                  f"{rope_q['us_prepared']:.1f} us (q prepared rows: attention alone)")  # fmt: skip
            report["rope_q"] = rope_q
        window = f", sliding window {args.window}" if args.window else ""
        print(f"\nDecode attention, one layer (32 q heads, 8 KV heads of 128), batch 1{window}")
        _attention_table(rows)
        report["attention"] = rows
        if args.attention_sweep:
            context = int(args.attention_sweep)
            swept = []
            for k, v in pairs:
                try:
                    swept += attention.measure(
                        k, v, context, copy_bw, tunings=attention.sweep_tunings()
                    )
                    for page_size in args.sweep_pages:
                        swept += attention.measure(k, v, context, copy_bw, page_size=page_size)
                except Exception as error:
                    print(f"sweep {k}/{v} at {context}: failed: {error!r}"[:300])
            print(f"\nLaunch shapes at {context} (programs per SM, warps, stages; pages of 64)")
            print("(fit: as many programs as one SM holds; serial reduce: not overlapped)")
            _attention_table(swept, tuning=True)
            report["attention_sweep"] = swept
        writes = []
        for k, v in pairs if not args.no_write else []:
            try:
                writes.append(attention.measure_write(k, v))
            except Exception as error:
                print(f"write {k}/{v}: failed: {error!r}"[:300])
        print("\nKV write (RoPE off): one position, and 4096 positions")
        for w in writes:
            print(f"{w['k'] + '/' + w['v']:10} {w['us_one_token']:8.1f} us {w['us_4096']:9.1f} us")
        report["write"] = writes

    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
