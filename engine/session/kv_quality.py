"""The built-in KV check: how much each K/V cache type moves this model's next-token
distributions from the f16 cache's, measured on the loaded file in seconds, kept per file and
pair, and read by Best fit so that a type that hurts this model is not chosen for it.

    results = check_model(path)                 # llama.cpp's CPU build, the Hearth formats
    store(path, results)                        # kv-quality.json in the data folder
    found = cached(path)                        # {(engine, k, v): KvResult}, {} before a check
    plan_filter(found) -> (llama KV types to leave out, Hearth pairs to leave out)

    python -m engine.session.kv_quality MODEL.gguf    # what the window runs in the background

The text is the opening of the KV-quality prose (kv_check_text.py, a few hundred tokens), read in
chunks as one sequence. Each type's logits are compared with the same engine's f16 cache at
every position: mean KL(p_f16 || p_type) in nats and the share of positions whose most likely
token is unchanged (engine/llama/kv_divergence.py).

A pair HURTS this model when its mean KL is above HURTS_KL: 0.05 nats, between llama.cpp's
q8_0 (0.004-0.008 over 2,700 tokens on SmolLM2-135M and Gemma 3 270M) and q4_0 on Gemma 3 270M
(0.099), where the most likely token already changes at several positions in a hundred
(docs/performance.md, "KV quality per model"). Best fit leaves such a type out for this model
only; the Model page still offers it, with its figure.

The check runs in its own process (the engine worker keeps serving meanwhile): llama.cpp's
f16, q8_0 and q4_0 caches on the CPU, and, where torch is installed, the Hearth engine's
formats through its plain-torch path with each format's reference round trip
(kernels/kv_formats.py) between the cache and attention, on a GPU where one has room for it
beside the engine (engine/hearth/kv_divergence.py check_device), else on the CPU. kivi4 is
left out there: its real cache keeps the newest page exact, which the round trip does not.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from engine.files import write_json_atomic
from engine.gguf import read_model_info
from engine.paths import data_dir
from engine.planner.records import PlanRequest

HURTS_KL = 0.05
# The check reads every position's logits on the CPU, three caches of llama.cpp's and, with the
# Hearth engine, five more: past this much weight it no longer takes seconds but minutes, so
# larger files are not checked (Best fit keeps the figures measured on other models for them).
MAX_CHECK_BYTES = 2 * 1024**3
OFF_ENV = "HEARTH_KV_CHECK"  # "0": no background check (the GUI tests' fake models)
LLAMA_PAIRS = (("q8_0", "q8_0"), ("q4_0", "q4_0"))
HEARTH_PAIRS = (("q8", "q8"), ("q8", "rot4"), ("rot4", "rot4"), ("rot2", "rot4"))
# the check's length: 256 tokens give the verdicts of 384 and of 2,700 on SmolLM2-135M and
# Gemma 3 270M (docs/performance.md, "KV quality per model"), in two thirds of 384's time
MAX_TOKENS = 256
VERSION = 2  # of the cache file and of the check's text and length

Key = tuple[str, str, str]  # (engine, type_k, type_v)


@dataclass(frozen=True)
class KvResult:
    mean_kl: float
    same_top1: float
    positions: int
    seconds: float  # the whole check of this engine's types, f16 included

    @property
    def hurts(self) -> bool:
        return self.mean_kl > HURTS_KL


def cache_path() -> Path:
    return data_dir() / "kv-quality.json"


def file_key(path: str | Path) -> str:
    """The file as the cache knows it: its path, size and modification time (a replaced file
    is checked again)."""
    st = os.stat(path)
    return f"{Path(path).resolve()}|{st.st_size}|{st.st_mtime_ns}"


def _read_all(where: Path) -> dict:
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}


def cached(path: str | Path, where: Path | None = None) -> dict[Key, KvResult]:
    """The check's results for this file, {} when it has not been checked (or changed since)."""
    try:
        key = file_key(path)
    except OSError:
        return {}
    found = {}
    for row in _read_all(where or cache_path()).get(key, []):
        try:
            found[(row["engine"], row["type_k"], row["type_v"])] = KvResult(
                float(row["mean_kl"]), float(row["same_top1"]), int(row["positions"]),
                float(row["seconds"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError):
            continue  # a damaged row: that pair counts as unchecked
    return found


def store(path: str | Path, results: dict[Key, KvResult], where: Path | None = None) -> None:
    where = where or cache_path()
    files = _read_all(where)
    files[file_key(path)] = [
        {"engine": e, "type_k": k, "type_v": v, **asdict(r)} for (e, k, v), r in results.items()
    ]
    write_json_atomic(where, {"version": VERSION, "files": files})


def plan_filter(
    results: dict[Key, KvResult],
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(llama.cpp KV types Best fit leaves out, Hearth K/V pairs it leaves out) for this model:
    the pairs whose measured KL hurts it. llama.cpp's planner takes one type for K and V."""
    llama = tuple(k for (e, k, v), r in results.items() if e == "llama" and k == v and r.hurts)
    hearth = tuple((k, v) for (e, k, v), r in results.items() if e == "hearth" and r.hurts)
    return llama, hearth


def with_kv_check(request: PlanRequest, results: dict[Key, KvResult]) -> PlanRequest:
    """`request` without the types and pairs this model's check found to hurt it (llama.cpp's
    f16 always stays: it is the reference)."""
    llama, hearth = plan_filter(results)
    if not llama and not hearth:
        return request
    kv_types = tuple(t for t in request.kv_types if t not in llama or t == "f16")
    return replace(
        request,
        kv_types=kv_types or ("f16",),
        hearth_pairs_left_out=tuple(dict.fromkeys((*request.hearth_pairs_left_out, *hearth))),
    )


def summary_text(results: dict[Key, KvResult]) -> str:
    """ "KV quality for this model (mean KL against f16): q8_0 0.0031, q4_0 0.0820 (hurts this
    model: not chosen by Best fit); Hearth q8/q8 0.0012, ... Checked in 4.1 s." """
    if not results:
        return ""
    parts = []
    for engine, label in (("llama", ""), ("hearth", "Hearth ")):
        for (e, k, v), r in results.items():
            if e != engine or (k, v) in (("f16", "f16"),):
                continue
            name = k if (engine == "llama" and k == v) else f"{k}/{v}"
            verdict = " (hurts this model: Best fit leaves it out)" if r.hurts else ""
            parts.append(f"{label}{name} {r.mean_kl:.4f}{verdict}")
    seconds = sum({r.seconds for r in results.values()})
    tokens = max(r.positions for r in results.values())
    return (
        f"KV quality for this model (mean KL against f16 over {tokens} tokens): "
        f"{', '.join(parts)}. Checked in {seconds:.1f} s."
    )


# -- the check ---------------------------------------------------------------------------------


def check_refusal(path: str | Path) -> str | None:
    """Why this file is not checked, in one line, or None."""
    if os.environ.get(OFF_ENV) == "0":
        return f"The KV check is off ({OFF_ENV}=0)."
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return f"The KV check could not read {Path(path).name}: {exc.strerror or exc}."
    if size > MAX_CHECK_BYTES:
        return (
            f"The KV check runs on the CPU and is kept for files up to "
            f"{MAX_CHECK_BYTES / 1024**3:.0f} GiB ({Path(path).name} is {size / 1024**3:.1f} "
            "GiB); Best fit uses the KV figures measured on other models."
        )
    return None


def check_tokens(path: str, max_tokens: int = MAX_TOKENS) -> list[int]:
    from engine.llama.driver import Model
    from engine.llama.params import ModelSettings
    from engine.session.kv_check_text import KV_CHECK_TEXT

    vocab = Model(ModelSettings(path=path, vocab_only=True))
    try:
        return vocab.tokenize(KV_CHECK_TEXT, add_special=True, parse_special=False)[:max_tokens]
    finally:
        vocab.close()


def check_model(path: str, *, hearth: bool | None = None, threads: int = 0) -> dict[Key, KvResult]:
    """Every pair against f16 on this file. `hearth`: also the Hearth engine's formats (None:
    where torch is installed and the engine runs this architecture)."""
    from engine.hardware.cpu_probe import physical_cores
    from engine.llama.kv_divergence import llama_kv_divergence

    tokens = check_tokens(path)
    # half the cores: the check runs beside the engine worker, and ggml's threads spin-wait,
    # so taking every core from a busy machine slows the check itself several times over
    threads = threads or max(1, physical_cores() // 2)
    results: dict[Key, KvResult] = {}
    began = time.perf_counter()
    found = llama_kv_divergence(path, tokens, LLAMA_PAIRS, threads=threads)
    took = time.perf_counter() - began
    for (k, v), d in found.items():
        results[("llama", k, v)] = KvResult(d.mean_kl, d.same_top1, d.positions, took)
    if hearth is None:
        hearth = _hearth_runs(path)
    if hearth:
        from engine.hearth.kv_divergence import hearth_kv_divergence

        began = time.perf_counter()
        found = hearth_kv_divergence(path, tokens, HEARTH_PAIRS, threads=threads)
        took = time.perf_counter() - began
        for (k, v), d in found.items():
            results[("hearth", k, v)] = KvResult(d.mean_kl, d.same_top1, d.positions, took)
    return results


def _hearth_runs(path: str) -> bool:
    try:
        import torch  # noqa: F401

        from engine.gguf import read_model_info
        from engine.hearth.capabilities import model_unsupported_reason

        return model_unsupported_reason(read_model_info(path), gpu=False) is None
    except Exception:  # no torch, or a header it cannot read: llama.cpp's types only
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m engine.session.kv_quality MODEL.gguf", file=sys.stderr)
        return 2
    path = args[0]
    found = cached(path)
    refused = None if found else check_refusal(path)
    if refused:
        print(refused, file=sys.stderr)
        return 1
    if not found:
        try:
            read_model_info(path)  # a file that is no GGUF is said so before llama.cpp loads
            found = check_model(path)
        except Exception as exc:  # said in one line; the window shows it and plans without it
            print(f"The KV check could not run on {Path(path).name}: {exc}", file=sys.stderr)
            return 1
        store(path, found)
    print(json.dumps({"summary": summary_text(found)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
