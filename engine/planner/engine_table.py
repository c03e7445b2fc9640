"""The measured figures that choose between llama.cpp and the Hearth engine, and the words for it.

engine_figures.json (beside this module) holds measured figures only, each with its source:
decode speed per device class, engine, K/V types and depth; prompt speed (a chunk of tokens
into an empty cache) per device class and engine; and the quality of each KV cache format
(mean KL against the same engine's f16 cache, per model). Nothing here is estimated:
a device class without the Hearth engine's figures has no verdict, and Best fit keeps llama.cpp
there, saying so.

    verdict = speed_verdict("cuda sm_90")        # SpeedVerdict: faster / slower / unmeasured
    kv_cost("hearth", "q8", "rot4")              # worst mean KL over the measured models
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from engine.enums import Engine

FIGURES = Path(__file__).with_name("engine_figures.json")
LLAMA, HEARTH = Engine.LLAMA, Engine.HEARTH
# KV formats whose KL is above this lose too much to be chosen by Best fit (Hearth's K rot2:
# perplexity 82.6 against 24.1 on SmolLM2); the Model page still offers them, marked.
UNUSABLE_KL = 0.5


@dataclass(frozen=True)
class DecodeFigure:
    device_class: str
    device: str
    model: str
    engine: str
    type_k: str
    type_v: str
    depth: int
    tokens_per_second: float
    source: str
    moe: bool = False  # a mixture-of-experts model's figure (its own verdict: speed_verdict)
    # experts in system RAM: the Hearth engine's (engine/hearth/expert_offload.py) or llama.cpp's
    # --n-cpu-moe split, measured at the same free VRAM (named in `model`); several llama.cpp
    # settings may be listed, the fastest is the one compared
    experts_in_ram: bool = False
    setting: str = ""  # e.g. "--n-cpu-moe 24", or the Hearth engine's "22 layers, 9 slots"
    # what has replaced the code this figure measured (shown faster in turn); kept for the
    # record, left out of the verdicts, which speak for the engine as it is
    superseded: str = ""


@dataclass(frozen=True)
class PromptFigure:
    device_class: str
    device: str
    model: str
    engine: str
    tokens: int  # in one chunk, into an empty cache
    tokens_per_second: float
    source: str
    moe: bool = False


@dataclass(frozen=True)
class ServeFigure:
    """Sequences decoded together: a server's aggregate decode speed at `clients` streaming
    clients (benchmarks/server_concurrency.py: tokens after each reply's first over the time
    after it), llama.cpp's being llama-server of the same build."""

    device_class: str
    device: str
    model: str
    engine: str
    clients: int
    tokens_per_second: float
    ttft_p95_s: float
    source: str
    moe: bool = False


@dataclass(frozen=True)
class SpeedVerdict:
    """How the Hearth engine's measured decode compares with llama.cpp's on a device class."""

    device_class: str
    # the worst Hearth / llama.cpp ratio over the depths both measured and the prompt figures
    ratio: float | None
    text: str

    @property
    def hearth_faster(self) -> bool:
        return self.ratio is not None and self.ratio >= 1.0


def device_class(backend: str, compute_capability: str | None = None) -> str:
    """ "cuda sm_90" (NVIDIA, by compute capability), "cuda" when unknown, "rocm", "metal"..."""
    if backend == "cuda" and compute_capability:
        return "cuda sm_" + compute_capability.replace(".", "")
    return backend


@cache
def _figures() -> dict:
    return json.loads(FIGURES.read_text(encoding="utf-8"))


def decode_figures(device_class_name: str | None = None) -> tuple[DecodeFigure, ...]:
    rows = (DecodeFigure(**row) for row in _figures()["decode"])
    return tuple(r for r in rows if device_class_name in (None, r.device_class))


def prompt_figures(device_class_name: str | None = None) -> tuple[PromptFigure, ...]:
    rows = (PromptFigure(**row) for row in _figures().get("prompt", ()))
    return tuple(r for r in rows if device_class_name in (None, r.device_class))


def serve_figures(device_class_name: str | None = None) -> tuple[ServeFigure, ...]:
    rows = (ServeFigure(**row) for row in _figures().get("serve", ()))
    return tuple(r for r in rows if device_class_name in (None, r.device_class))


def kv_cost(engine: str, type_k: str, type_v: str) -> float | None:
    """The worst mean KL (against f16) of a K/V pair over the measured models; None: unmeasured."""
    for row in _figures()["kv_quality"]:
        if (row["engine"], row["type_k"], row["type_v"]) == (engine, type_k, type_v):
            return max(row["mean_kl"].values())
    return None


def measured_kv_pairs(engine: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        (row["type_k"], row["type_v"])
        for row in _figures()["kv_quality"]
        if row["engine"] == engine
    )


def speed_verdict(
    device_class_name: str, moe: bool = False, experts_in_ram: bool = False, clients: int = 1
) -> SpeedVerdict:
    """Hearth against llama.cpp on this device class: f16 caches, the same model, every depth
    both engines were measured at (superseded figures left out); the worst ratio decides.
    `moe`: from mixture-of-experts models' figures only (their experts run other kernels than
    a dense model's matrices), else from dense models' only. `experts_in_ram`: from figures
    with the experts in system RAM only (the Hearth engine's placement against llama.cpp's
    fastest --n-cpu-moe setting at the same free VRAM). `clients` above 1 (a server's parallel
    requests): from the serving figures at every client count both were measured at up to
    `clients` (_serving)."""
    if clients > 1:
        return _serving(device_class_name, moe, clients)
    figures = tuple(
        f
        for f in decode_figures(device_class_name)
        if f.moe == moe and f.experts_in_ram == experts_in_ram and not f.superseded
    )

    def f16(engine: str) -> dict[tuple[str, int], DecodeFigure]:
        best: dict[tuple[str, int], DecodeFigure] = {}
        for f in figures:
            if f.engine == engine and f.type_k == f.type_v == "f16":
                key = (f.model, f.depth)
                if key not in best or f.tokens_per_second > best[key].tokens_per_second:
                    best[key] = f  # the fastest setting of several (--n-cpu-moe values)
        return best

    hearth, llama = f16(HEARTH), f16(LLAMA)
    shared = sorted(set(hearth) & set(llama))
    if not shared:
        kind = " on mixture-of-experts models" if moe else ""
        if experts_in_ram:
            kind = " with a mixture-of-experts model's experts in RAM (against --n-cpu-moe)"
        return SpeedVerdict(
            device_class_name,
            None,
            f"the Hearth engine's speed{kind} has not been measured on this GPU class "
            f"({device_class_name}) beside llama.cpp's",
        )
    ratios = [
        (
            hearth[k].tokens_per_second / llama[k].tokens_per_second,
            "decodes",
            f"{k[0]}, {k[1]:,} tokens deep ({hearth[k].source})",
        )
        for k in shared
    ]
    prompts = {
        (f.engine, f.model, f.tokens): f
        for f in prompt_figures(device_class_name)
        if f.moe == moe and not experts_in_ram
    }
    for (engine, model, tokens), ours in prompts.items():
        theirs = prompts.get((LLAMA, model, tokens))
        if engine == HEARTH and theirs is not None:
            where = f"{model}, a {tokens}-token prompt ({ours.source})"
            ratio = ours.tokens_per_second / theirs.tokens_per_second
            ratios.append((ratio, "reads prompts", where))
    worst, what, where = min(ratios)
    at = "at least" if worst >= 1.0 else "at"
    text = f"the Hearth engine {what} {at} {worst:.2f}x llama.cpp's speed here ({where})"
    return SpeedVerdict(device_class_name, worst, text)


def _serving(device_class_name: str, moe: bool, clients: int) -> SpeedVerdict:
    """The worst aggregate-decode ratio, Hearth against llama-server, over the client counts
    from 2 to `clients` both were measured at (or the smallest above `clients` when none is
    below): a batch that wins at 64 clients and loses at 4 must not be chosen for 4."""
    rows = [f for f in serve_figures(device_class_name) if f.moe == moe and f.clients > 1]
    hearth = {(f.model, f.clients): f for f in rows if f.engine == HEARTH}
    llama = {(f.model, f.clients): f for f in rows if f.engine == LLAMA}
    shared = sorted(set(hearth) & set(llama), key=lambda k: k[1])
    within = [k for k in shared if k[1] <= clients] or shared[:1]
    if not within:
        kind = " a mixture-of-experts model's" if moe else ""
        return SpeedVerdict(
            device_class_name,
            None,
            f"the Hearth engine serving{kind} {clients} requests at once has not been measured "
            f"on this GPU class ({device_class_name}) beside llama-server's",
        )
    worst, key = min((hearth[k].tokens_per_second / llama[k].tokens_per_second, k) for k in within)
    at = "at least" if worst >= 1.0 else "at"
    text = (
        f"the Hearth engine serves {key[1]} clients {at} {worst:.2f}x llama-server's decode "
        f"speed here ({key[0]}, {hearth[key].source})"
    )
    return SpeedVerdict(device_class_name, worst, text)
