"""Does a GPU build give the CPU build's greedy output? One rule for every backend check.

Used by the Vulkan check (benchmarks/backends/test_vulkan.py) and the CUDA check
(tests/engine/runtime/test_gpu_matches_cpu.py). Both compare `N_TOKENS` greedy tokens after
`STORY` on the starter model with the CPU build's, using traces from engine/runtime/logit_trace.py.

Why not plain equality. The CPU build rounds differently from GPU builds: for a Q4_1 matrix it
quantizes the activations to 8 bits (q8_1) and takes integer dot products, and likewise to q8_0
for the Q8_0 output matrix; the Vulkan shaders multiply dequantized weights by f16/f32
activations. Measured on the starter model with this story (docs/backends.md): against exact f32
arithmetic on the same dequantized weights, the CPU build's logits are off by up to 0.55 on its
top-5 tokens and the gap between two of those tokens by up to 0.56, while lavapipe's are off by
0.15 and the CUDA build's (with installers/patches/, which make ggml-cuda round like ggml-cpu)
by 0.46. Where the CPU build's best tokens are closer than that, their order is its rounding,
not the model's, and a GPU build may honestly pick the other one.

The rule (`check`), with the CPU build's trace as the reference:

1. Teacher-forced on the CPU build's tokens, the device's argmax at every position is the CPU's,
   or a near-tie: a token whose CPU logit is within `NEAR_TIE` of the CPU's best (so it is among
   the CPU's top-k and the CPU's own top-2 are within `NEAR_TIE` too).
2. On the CPU's top-k tokens at every position, |device logit - CPU logit| <= `LOGIT_TOLERANCE`.
   A wrong kernel moves logits by several units (their spread is about 7 here).
3. The engine's own greedy text is the CPU's, or it leaves the CPU's text exactly where (1)
   found the first near-tie, with the device's token there. Until the first difference both
   runs see the same tokens, so the free-running output is the teacher-forced argmax; a text
   that leaves elsewhere means the trace did not compute what the engine computes.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

STORY = "Once upon a time, in a small village by the sea,"
N_TOKENS = 32
TOP_K = 5
# Logits. NEAR_TIE is below the 0.55 by which the CPU build's own rounding moves the gap between
# two of its top tokens (measured against exact arithmetic); LOGIT_TOLERANCE is about the sum of
# the two builds' measured errors (0.55 + 0.15) with room for other devices' rounding.
NEAR_TIE = 0.5
LOGIT_TOLERANCE = 1.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def run_trace(
    python: str,
    model_path: str,
    *,
    n_gpu_layers: int,
    reference: dict | None = None,
    env: dict[str, str] | None = None,
    flash_attn: str = "on",
    extra_args: tuple[str, ...] = (),
    timeout: float = 900,
) -> dict:
    """A greedy trace (or, given `reference`, one forced on its tokens and watching its top-k)
    from the build that `python` runs, in a child process, with flash attention on unless told
    otherwise; `extra_args` go to logit_trace as they are."""
    cmd = [python, "-m", "engine.runtime.logit_trace", model_path, "--prompt", STORY]
    cmd += ["--tokens", str(N_TOKENS), "--top-k", str(TOP_K), "--ctx", "1024"]
    cmd += ["--gpu-layers", str(n_gpu_layers), "--flash-attn", flash_attn, *extra_args]
    with tempfile.TemporaryDirectory(prefix="hearth-trace-") as folder:
        if reference is not None:
            ref_file = Path(folder) / "reference.json"
            ref_file.write_text(json.dumps(reference))
            cmd += ["--forced", str(ref_file), "--watch", str(ref_file)]
        done = subprocess.run(
            cmd,
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-20:])
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({done.returncode}):\n{tail}")
    return json.loads(done.stdout)


@dataclass(frozen=True)
class Position:
    """One teacher-forced step, seen from the CPU build's logits."""

    index: int
    cpu_token: int
    cpu_margin: float  # CPU's top-1 minus top-2 logit
    device_token: int
    gap: float | None  # CPU's best logit minus the CPU's logit of the device's token; None: not in
    # the CPU's top-k
    max_diff: float  # max |device - CPU| over the CPU's top-k tokens
    cpu_piece: str = ""
    device_piece: str = ""

    @property
    def agrees(self) -> bool:
        return self.device_token == self.cpu_token

    @property
    def near_tie(self) -> bool:
        return not self.agrees and self.gap is not None and self.gap <= NEAR_TIE


@dataclass
class Verdict:
    positions: list[Position]
    exact: bool  # the engine's greedy text is the CPU's
    problems: list[str] = field(default_factory=list)
    reference_text: str = ""
    device_text: str = ""

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def max_diff(self) -> float:
        return max(p.max_diff for p in self.positions)

    def summary(self) -> str:
        ties = [p for p in self.positions if p.near_tie]
        head = "exact match" if self.exact else "near-tie divergence" if self.passed else "FAILED"
        lines = [
            f"{head}: max |logit diff| {self.max_diff:.3f} on the CPU's top-{TOP_K} "
            f"(tolerance {LOGIT_TOLERANCE}); teacher-forced argmax differs at "
            f"{[p.index for p in self.positions if not p.agrees]}, near-ties "
            f"(within {NEAR_TIE} in the CPU's logits) at {[p.index for p in ties]}",
            f"CPU build: {self.reference_text!r}",
            f"device:    {self.device_text!r}",
        ]
        lines += [f"problem: {problem}" for problem in self.problems]
        return "\n".join(lines)

    def table(self) -> str:
        """Every position: the diagnostic printed with a failure (and on request)."""
        rows = [
            "pos  CPU token             CPU top-2 margin  device token          "
            "gap in CPU logits  max|diff|"
        ]
        for p in self.positions:
            gap = "outside top-k" if p.gap is None else f"{p.gap:.3f}"
            mark = "" if p.agrees else "  near-tie" if p.near_tie else "  DIFFERS"
            cpu = f"{p.cpu_token} {p.cpu_piece!r}"
            device = f"{p.device_token} {p.device_piece!r}"
            rows.append(
                f"{p.index:3d}  {cpu:20.20s}  {p.cpu_margin:16.3f}  {device:20.20s}  "
                f"{gap:>17s}  {p.max_diff:9.3f}{mark}"
            )
        return "\n".join(rows)

    def report(self) -> str:
        return self.summary() + "\n" + self.table()


def check(reference: dict, device: dict, device_text: str) -> Verdict:
    """Judge a device by the rule above.

    `reference`: the CPU build's greedy trace. `device`: the device's trace forced on the
    reference's tokens and watching its top-k ids (logit_trace --forced REF --watch REF).
    `device_text`: the engine's own greedy text on the device.
    """
    n = len(reference["tokens"])
    if reference.get("forced"):
        raise ValueError("the reference must be a greedy trace, not a forced one")
    if device["tokens"] != reference["tokens"] or not device.get("forced"):
        raise ValueError("the device trace must be forced on the reference's tokens")
    positions = [
        _position(i, reference["steps"][i], device["steps"][i], reference["pieces"][i])
        for i in range(n)
    ]
    verdict = Verdict(
        positions=positions,
        exact=device_text == reference["text"],
        reference_text=reference["text"],
        device_text=device_text,
    )
    for p in positions:
        if not p.agrees and not p.near_tie:
            gap = "outside the CPU's top-k" if p.gap is None else f"{p.gap:.3f} below its best"
            verdict.problems.append(
                f"position {p.index}: the device picks {p.device_token}, {gap} in the CPU "
                f"build's logits (a near-tie is within {NEAR_TIE})"
            )
        if p.max_diff > LOGIT_TOLERANCE:
            verdict.problems.append(
                f"position {p.index}: a logit differs by {p.max_diff:.3f} from the CPU build's "
                f"(tolerance {LOGIT_TOLERANCE})"
            )
    first = next((p for p in positions if not p.agrees), None)
    if first is None and not verdict.exact:
        verdict.problems.append(
            "the teacher-forced argmax agrees everywhere but the engine's text differs: the "
            "trace and the engine did not compute the same thing"
        )
    if first is not None:
        pieces = reference["pieces"][: first.index]
        expected = bytes.fromhex("".join(pieces) + device["steps"][first.index]["argmax_piece"])
        if not device_text.encode("utf-8").startswith(expected):
            verdict.problems.append(
                f"the engine's text does not leave the CPU's at position {first.index} with "
                f"the device's token {first.device_piece!r}, as the teacher-forced trace says "
                "it would: the trace and the engine did not compute the same thing"
            )
    return verdict


def _position(index: int, ref: dict, dev: dict, cpu_piece: str) -> Position:
    ref_ids, ref_logits = ref["top_ids"], ref["top_logits"]
    watched = dev["watched_logits"]
    if len(watched) != len(ref_ids):
        raise ValueError("the device trace must watch the reference's top-k ids")
    device_token = dev["argmax"]
    gap = None
    if device_token in ref_ids:
        gap = ref_logits[0] - ref_logits[ref_ids.index(device_token)]
    return Position(
        index=index,
        cpu_token=ref_ids[0],
        cpu_margin=ref_logits[0] - ref_logits[1],
        device_token=device_token,
        gap=gap,
        max_diff=max(abs(a - b) for a, b in zip(watched, ref_logits, strict=True)),
        cpu_piece=_text(cpu_piece),
        device_piece=_text(dev["argmax_piece"]),
    )


def _text(piece_hex: str) -> str:
    return bytes.fromhex(piece_hex).decode("utf-8", "replace")
