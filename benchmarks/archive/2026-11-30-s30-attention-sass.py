"""Compile the decode split kernel for sm_90 without a GPU, as the engine launches it at a
32k decode step (one query, positions on the device, kivi4/rot4 or rot4/rot4, 2 warps, 5
stages; G query heads a KV head): registers, the loop's instruction count (the most executed
block: the instructions between the loop's label and its back branch) and its opcode mix.

    python3 2026-11-30-s30-attention-sass.py [--pair kivi4/rot4] [--group 4] [--mask-tail]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
from pathlib import Path

import triton

import testkit.sm90_compile as sm90
from kernels.decode_launch import AttentionTuning

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def compile_split(k_fmt: str, v_fmt: str, group: int, warps: int, stages: int, mask_tail: bool):
    """testkit.sm90_compile's split kernel (Llama 3 8B's launch) with G query heads a KV head."""
    sm90.HKV = sm90.HQ // group
    tuning = AttentionTuning(num_warps=warps, num_stages=stages, mask_tail=mask_tail)
    return sm90.compile_split(k_fmt, v_fmt, tuning)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair", default="kivi4/rot4")
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--warps", type=int, default=2)
    parser.add_argument("--stages", type=int, default=5)
    parser.add_argument("--mask-tail", action="store_true")
    parser.add_argument("--dump", help="write the SASS here")
    args = parser.parse_args()
    kernel = compile_split(*args.pair.split("/"), args.group, args.warps, args.stages,
                           args.mask_tail)  # fmt: skip
    path = Path(os.environ.get("TMPDIR", "/tmp")) / "split.cubin"
    path.write_bytes(kernel.asm["cubin"])
    usage = subprocess.run([str(CUOBJDUMP), "-res-usage", str(path)], capture_output=True,
                           text=True, check=True).stdout  # fmt: skip
    sass = subprocess.run([str(CUOBJDUMP), "-sass", str(path)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    if args.dump:
        Path(args.dump).write_text(sass)
    lines = re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)
    addr = [int(a, 16) for a, _ in lines]
    # the loop: the backward branch spanning the most instructions
    best = (0, 0)
    for i, (_, text) in enumerate(lines):
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", text)
        if m and m.group(1) and int(m.group(1), 16) < addr[i]:
            start = addr.index(int(m.group(1), 16))
            if i - start > best[1] - best[0]:
                best = (start, i)
    body = [t for _, t in lines[best[0] : best[1] + 1]]
    ops = collections.Counter()
    for t in body:
        tok = t.split()
        ops[tok[1] if tok[0].startswith("@") else tok[0]] += 1
    regs = re.search(r"REG:(\d+)", usage).group(1)
    print(f"{args.pair} G={args.group} warps {args.warps} stages {args.stages} "
          f"mask_tail {args.mask_tail}: {regs} registers, {len(lines)} instructions, "
          f"loop {len(body)}")  # fmt: skip
    print("  " + ", ".join(f"{k} {v}" for k, v in ops.most_common(24)))


if __name__ == "__main__":
    main()
