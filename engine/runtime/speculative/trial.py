"""Whether speculative decoding pays for this model on this engine and device: a short trial,
measured once and remembered (SpeculativeParams.method "auto").

A step that checks k drafts costs cost(k) plain steps and emits, on average,
expected_tokens(a, k) tokens at acceptance a (draft_length.py). Prompt lookup keeps roughly
half to three quarters of its drafts on replies that copy from their prompt (rewrites,
summaries, answers from a text: docs/speculative.md's measurements) and pauses itself on replies
where nothing is kept (draft_length.py: probes add at most a few percent). So speculation is on
by default where a check of TRIAL_DRAFTS drafts costs at most ON_BELOW plain steps: at
acceptance 0.6 that is expected_tokens(0.6, 4) / 2.0 = 1.15x or more; above it a check is too
dear for what a copying reply keeps (a CPU, where every checked token costs its own arithmetic,
measures 3-5 steps), and it is off.

The trial runs on the loaded context after its warm-up: a short prompt, warm plain steps and
checks rolled back, each timed after the device has finished (ctx.synchronize), medians; then
the context is cleared. The answer is remembered per model file (path, size, modification
time), engine, device and K/V types in HEARTH_DATA_DIR's speculation-trials.json, so a model
pays for its trial once.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.paths import data_dir
from engine.runtime.speculative.draft_length import expected_tokens

TRIAL_DRAFTS = 4
ON_BELOW = 2.0  # the most plain steps a check of TRIAL_DRAFTS drafts may cost to be on
TYPICAL_ACCEPTANCE = 0.6  # prompt lookup on a reply that copies (docs/speculative.md)
PLAIN_STEPS, CHECKS = 4, 3  # timed, after one of each not timed
TRIALS_FILE = "speculation-trials.json"
# what the trial decodes: any text; only its length matters to the cost
TRIAL_TEXT = "The river runs through the valley to the sea, past farms, towns and old mills. " * 4


@dataclass(frozen=True)
class TrialResult:
    plain_step_seconds: float
    check_cost: float  # a check of TRIAL_DRAFTS drafts, in plain steps

    @property
    def pays(self) -> bool:
        return self.check_cost <= ON_BELOW

    def reason(self) -> str:
        """Why it is on or off, in words for the stats line."""
        cost = f"a check of {TRIAL_DRAFTS} drafts costs {self.check_cost:.1f} plain steps here"
        if self.pays:
            return f"on: {cost}"
        return f"off: {cost}, more than kept drafts win back"

    def gain_when_copying(self) -> float:
        """The speed-up at TYPICAL_ACCEPTANCE, drafting TRIAL_DRAFTS a step."""
        return expected_tokens(TYPICAL_ACCEPTANCE, TRIAL_DRAFTS) / self.check_cost


def measure(ctx, prompt: list[int], drafts: int = TRIAL_DRAFTS) -> TrialResult:
    """Time plain steps and checks of `drafts` drafts on `ctx` after `prompt`; the context is
    cleared after."""
    try:
        ctx.clear()
        ctx.decode(prompt)
        position = len(prompt)
        token = prompt[-1]
        plain = []
        for i in range(PLAIN_STEPS + 1):
            started = time.perf_counter()
            ctx.step(token)
            ctx.synchronize()
            if i > 0:
                plain.append(time.perf_counter() - started)
        position += PLAIN_STEPS + 1
        checks = []
        for i in range(CHECKS + 1):
            started = time.perf_counter()
            outs = ctx.check([token] * (drafts + 1), position)
            ctx.synchronize()
            if i > 0 and len(outs) == drafts + 1:
                checks.append(time.perf_counter() - started)
            ctx.forget_from(position)
        step = statistics.median(plain)
        if not checks:  # the cache would not take a whole check there: price it as dear
            return TrialResult(step, float("inf"))
        return TrialResult(step, statistics.median(checks) / step)
    finally:
        ctx.clear()


def trial_key(path: str, engine: str, device: str, type_k: str, type_v: str) -> str:
    """What a remembered trial is valid for: the same file, engine, device and K/V types."""
    try:
        stat = os.stat(path)
        file_id = f"{os.path.abspath(path)}|{stat.st_size}|{int(stat.st_mtime)}"
    except OSError:
        file_id = os.path.abspath(path)
    return f"{file_id}|{engine}|{device}|{type_k}/{type_v}"


def remembered(key: str, store: Path | None = None) -> TrialResult | None:
    try:
        entry = json.loads(_store(store).read_text(encoding="utf-8"))[key]
        return TrialResult(float(entry["plain_step_seconds"]), float(entry["check_cost"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(key: str, result: TrialResult, store: Path | None = None) -> None:
    """Add the result to the store; a store that cannot be written is left as it is (the trial
    runs again at the next load)."""
    path = _store(store)
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):
        known = {}
    known[key] = asdict(result)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=1), encoding="utf-8")
    except OSError:
        pass


def _store(store: Path | None) -> Path:
    return store if store is not None else data_dir() / TRIALS_FILE
