"""The one-token down's row in two chunks of groups against the padded row, in one process:
2026-11-30-s29-step-ab.py's graph replays of a decode step with two more variants. Run from a
tree with 2026-11-30-s32-down-in-two-chunks.patch applied (kernels/moe_one_token.py's
first_chunk and rest_chunk, which launch_down reads at each launch):

    python benchmarks/archive/2026-11-30-s32-down-chunks-ab.py MODEL OUTDIR \
        --variants chunked padded --rounds 2
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import triton

from kernels import moe_one_token

_spec = importlib.util.spec_from_file_location(
    "step_ab", Path(__file__).with_name("2026-11-30-s29-step-ab.py")
)
step_ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(step_ab)


def _down_chunks(first, rest):
    def setup(cache) -> None:
        moe_one_token.first_chunk, moe_one_token.rest_chunk = first, rest

    return setup


step_ab.VARIANTS["chunked"] = _down_chunks(moe_one_token.first_chunk, moe_one_token.rest_chunk)
step_ab.VARIANTS["padded"] = _down_chunks(triton.next_power_of_2, lambda groups: 0)

if __name__ == "__main__":
    step_ab.main()
