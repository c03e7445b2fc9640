"""Run llama.cpp's `llama-bench` on a file and read its figures (JSON output).

llama-bench must come from the same llama.cpp that the engine was built from, or the ratios
compare two versions rather than two code paths; docs/performance.md says how to build both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class BenchRow:
    n_prompt: int
    n_gen: int
    n_depth: int
    tokens_per_second: float
    stddev: float

    @property
    def label(self) -> str:
        test = f"pp{self.n_prompt}" if self.n_prompt else f"tg{self.n_gen}"
        return f"{test} @ d{self.n_depth}" if self.n_depth else test


class LlamaBenchError(Exception):
    pass


def find_llama_bench(explicit: str | None = None) -> str | None:
    if explicit:
        return explicit
    found = shutil.which("llama-bench")
    if found:
        return found
    lib_dir = os.environ.get("LLAMA_CPP_LIB_PATH")
    if lib_dir and os.path.isfile(os.path.join(lib_dir, "llama-bench")):
        return os.path.join(lib_dir, "llama-bench")
    return None


def run_llama_bench(
    binary: str,
    model: str,
    *,
    prompt: int = 0,
    gen: int = 0,
    depth: int = 0,
    reps: int = 3,
    flash_attn: bool = True,
    gpu_layers: int = 999,
    type_k: str = "f16",
    type_v: str = "f16",
    threads: int | None = None,
    timeout_s: float = 1800,
) -> BenchRow:
    """One llama-bench test: prefill of `prompt` tokens, or `gen` decode steps, at `depth`."""
    cmd = [
        binary, "-m", model, "-p", str(prompt), "-n", str(gen), "-d", str(depth),
        "-r", str(reps), "-fa", "1" if flash_attn else "0", "-ngl", str(gpu_layers),
        "-ctk", type_k, "-ctv", type_v, "-o", "json",
    ]  # fmt: skip
    if threads:
        cmd += ["-t", str(threads)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaBenchError(f"llama-bench did not run: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-5:])
        raise LlamaBenchError(f"llama-bench failed ({done.returncode}):\n{tail}")
    try:
        rows = json.loads(done.stdout)
        row = rows[0]
        return BenchRow(
            n_prompt=int(row["n_prompt"]),
            n_gen=int(row["n_gen"]),
            n_depth=int(row.get("n_depth", 0)),
            tokens_per_second=float(row["avg_ts"]),
            stddev=float(row.get("stddev_ts", 0.0)),
        )
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LlamaBenchError(f"llama-bench printed something unexpected: {exc}") from exc
