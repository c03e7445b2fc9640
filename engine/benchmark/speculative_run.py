"""`hearth bench --speculative`: decode speed with and without speculative decoding, on one load.

Each task (a JSON file: benchmarks/data/speculative_tasks.json in a source checkout) is answered
greedily without speculation, then with it, back to back, `reps` times: on a shared machine the
two figures of a pair see the same load. Both replies must be the same text (greedy speculation
changes nothing else); a pair that differs is reported, never hidden. Figures are the worker's
own clocks (decode tokens per second, from the first token to the last), the drafts kept, and
the speed-up the worker itself reported against its timed plain steps (each reply's stats line).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue

GREEDY = p.SamplingParams(temperature=0.0)
EVENT_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Task:
    name: str
    user: str
    max_tokens: int


@dataclass(frozen=True)
class SpeculativeBenchConfig:
    model: str
    tasks: tuple[Task, ...]
    speculative: p.SpeculativeParams
    reps: int = 3
    n_ctx: int = 4096
    gpu_layers: int = -1
    threads: int = 0
    flash_attn: str = "auto"
    engine: str = "llama"  # ModelParams.engine: "hearth" is refused if it falls back to llama


class SpeculativeBenchFailed(Exception):
    pass


def load_tasks(path: str | Path) -> tuple[Task, ...]:
    """The tasks of a JSON file {"tasks": [{"name", "user", "max_tokens"}, ...]}."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return tuple(
            Task(name=str(t["name"]), user=str(t["user"]), max_tokens=int(t["max_tokens"]))
            for t in data["tasks"]
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpeculativeBenchFailed(
            f"The task file {path} could not be read ({exc}); give a JSON file shaped like "
            "benchmarks/data/speculative_tasks.json."
        ) from None


class SpeculativeBench:
    def __init__(self, config: SpeculativeBenchConfig, progress: Callable[[str], None]):
        self.config, self.progress = config, progress
        self.events = EventQueue()
        self.client = EngineClient(self.events)

    def run(self) -> dict:
        self.client.start()
        try:
            self._wait(p.Ready)
            loaded = self._load()
            tasks = {}
            for task in self.config.tasks:
                self.progress(f"{task.name}: {self.config.reps}x without, then with speculation…")
                tasks[task.name] = self._task(task)
            return {
                "model": self.config.model,
                "engine": loaded.engine,
                "speculative": loaded.speculative,
                "tasks": tasks,
            }
        finally:
            self.client.close()

    def _load(self) -> p.ModelLoaded:
        c = self.config
        self.client.load(
            p.ModelParams(
                path=c.model,
                n_ctx=c.n_ctx,
                n_gpu_layers=c.gpu_layers,
                n_threads=c.threads,
                flash_attn=c.flash_attn,
                speculative=c.speculative,
                engine=c.engine,
            )
        )
        loaded = self._wait(p.ModelLoaded, p.LoadFailed)
        if isinstance(loaded, p.LoadFailed):
            raise SpeculativeBenchFailed(f"the model did not load: {loaded.message}")
        if loaded.engine != c.engine:  # figures of another engine than asked must not pass
            raise SpeculativeBenchFailed(
                f"the {c.engine} engine was asked for and {loaded.engine} loaded the model: "
                f"{loaded.engine_note}"
            )
        if loaded.speculative == "off":
            raise SpeculativeBenchFailed(
                loaded.speculative_note or "the load has no speculative decoding to measure"
            )
        return loaded

    def _task(self, task: Task) -> dict:
        # A first reply, not measured, leaves the prompt in the KV cache: every measured reply
        # then starts from the same cache. (A prompt computed in one batch of hundreds of tokens
        # and one reused from the cache can differ in the last bits of a logit, and greedy
        # replies can part at a near-tie - with or without speculation.)
        self._reply(task, speculate=False)
        pairs = []
        for _ in range(self.config.reps):
            plain_text, plain = self._reply(task, speculate=False)
            fast_text, fast = self._reply(task, speculate=True)
            pairs.append((plain, fast, plain_text == fast_text))
        plain_rates = [s.decode_tokens_per_second for s, _, _ in pairs]
        fast_rates = [s.decode_tokens_per_second for _, s, _ in pairs]
        drafted = sum(s.n_drafted for _, s, _ in pairs)
        kept = sum(s.n_draft_accepted for _, s, _ in pairs)
        return {
            "tokens": pairs[0][0].n_generated,
            "plain_tok_s": plain_rates,
            "speculative_tok_s": fast_rates,
            "speedup_of_medians": statistics.median(fast_rates) / statistics.median(plain_rates),
            "speedup_per_pair": [f / s for s, f in zip(plain_rates, fast_rates, strict=True)],
            "speedup_reported": [s.speedup for _, s, _ in pairs],
            "drafted": drafted,
            "kept": kept,
            "acceptance": kept / drafted if drafted else 0.0,
            "same_text": all(same for _, _, same in pairs),
        }

    def _reply(self, task: Task, *, speculate: bool) -> tuple[str, p.GenerationStats]:
        rid = self.client.generate(
            messages=(p.ChatMessage(role="user", content=task.user),),
            sampling=GREEDY,
            max_tokens=task.max_tokens,
            speculate=speculate,
        )
        parts: list[str] = []
        while True:
            event = self._wait(p.TokenText, p.GenerationDone, p.GenerationFailed)
            if getattr(event, "request_id", rid) != rid:
                continue
            if isinstance(event, p.TokenText):
                parts.append(event.text)
            elif isinstance(event, p.GenerationFailed):
                raise SpeculativeBenchFailed(f"{task.name}: {event.message}")
            else:
                return "".join(parts), event.stats

    def _wait(self, *types):
        try:
            event = self.events.wait_for(*types, timeout=EVENT_TIMEOUT_S)
        except TimeoutError as exc:
            raise SpeculativeBenchFailed(str(exc)) from None
        if isinstance(event, EngineCrashed):
            raise SpeculativeBenchFailed(f"the engine crashed: {event.message}")
        return event


def format_report(report: dict) -> str:
    lines = [
        f"model: {report['model']} ({report.get('engine', 'llama')} engine)",
        f"speculative decoding: {report['speculative']} (greedy; decode tok/s, medians of pairs "
        "run back to back)",
        f"{'task':<12} {'tokens':>6} {'plain':>8} {'spec.':>8} {'speed-up':>9} {'kept':>6} "
        f"{'reported':>9}  same text",
    ]
    for name, t in report["tasks"].items():
        lines.append(
            f"{name:<12} {t['tokens']:>6} {statistics.median(t['plain_tok_s']):>8.1f} "
            f"{statistics.median(t['speculative_tok_s']):>8.1f} {t['speedup_of_medians']:>8.2f}x "
            f"{t['acceptance']:>6.0%} {statistics.median(t['speedup_reported']):>8.2f}x  "
            f"{'yes' if t['same_text'] else 'NO'}"
        )
    lines.append("per pair, measured (spec. tok/s over plain tok/s) / the stats line's claim:")
    for name, t in report["tasks"].items():
        pairs = zip(t["speedup_per_pair"], t["speedup_reported"], strict=True)
        lines.append(f"{name:<12} " + "  ".join(f"{m:.2f}/{r:.2f}" for m, r in pairs))
    return "\n".join(lines)
