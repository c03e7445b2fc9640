"""Measure Hearth's own generation path: the worker process, sampler, detokenizer and pipe.

Every figure is taken where a user would feel it: load and time to first token on the client's
side of the pipe; prefill and decode rates from the worker's clocks around llama.cpp's calls
(the same span llama-bench times). Prompts are exact token counts of random ids, as llama-bench
uses, and each repetition starts from a different token so that no KV cache is reused.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient, EngineCrashed, EventQueue

GREEDY = p.SamplingParams(temperature=0.0)
EVENT_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class BenchConfig:
    model: str
    prompt_tokens: int = 512
    decode_lengths: tuple[int, ...] = (128, 1024)
    depth: int = 8192
    depth_decode: int = 128
    reps: int = 3
    gpu_layers: int = -1
    flash_attn: str = "on"
    type_k: str = "f16"
    type_v: str = "f16"
    backend_sampling: bool = True
    threads: int = 0
    engine: str = "llama"  # ModelParams.engine: "llama" (llama.cpp) or "hearth"

    @property
    def n_ctx(self) -> int:
        need = max(self.depth + self.depth_decode, self.prompt_tokens, *self.decode_lengths) + 16
        return -(-need // 256) * 256


class BenchFailed(Exception):
    pass


class HearthBench:
    def __init__(self, config: BenchConfig, progress: Callable[[str], None] | None = None):
        self.config = config
        # Told at the start of each phase: a run on a slow machine takes minutes, and a silent
        # terminal for that long reads as a hang.
        self.progress = progress or (lambda _text: None)
        self.events = EventQueue()
        self.client = EngineClient(self.events)
        self.rng = random.Random(1234)
        self.n_vocab = 0
        self.peak_device_bytes = 0
        self.peak_worker_rss_bytes = 0
        self._device_baseline: dict[str, int] = {}
        self.bandwidth_gbps, self.bandwidth_source = 0.0, ""  # the gauge's, from ModelLoaded

    def run(self) -> dict:
        figures: dict = {}
        started = time.perf_counter()
        self.progress("Starting the engine…")
        self.client.start()
        try:
            self._wait(p.Ready)
            figures["worker_start_s"] = time.perf_counter() - started
            self._device_baseline = self._device_used()
            self.progress(f"Loading the model ({self.config.reps}×)…")
            figures["load_s"] = statistics.median(self._load() for _ in range(self.config.reps))
            # New context settings on the loaded weights (the worker keeps them): what applying
            # a new context length or KV type costs a person, shown beside the full load.
            figures["context_reload_s"] = self._load(fresh=False)
            self.progress(f"Prefill of {self.config.prompt_tokens:,} tokens…")
            figures.update(self._prefill())
            for n in self.config.decode_lengths:
                self.progress(f"Decoding {n:,} tokens…")
                rate, figures[f"bound_{n}_tok_s"] = self._decode(n, depth=0)
                figures[f"decode_{n}_tok_s"] = rate
            if self.config.depth:
                self.progress(f"Decoding at a depth of {self.config.depth:,} tokens…")
                rate, figures["bound_at_depth_tok_s"] = self._decode(
                    self.config.depth_decode, depth=self.config.depth, reps=1
                )
                figures["decode_at_depth_tok_s"] = rate
            figures["bandwidth_gbps"] = self.bandwidth_gbps
            figures["bandwidth_source"] = self.bandwidth_source
            self._note_peak()
            figures["peak_device_bytes"] = self.peak_device_bytes
            figures["peak_worker_rss_bytes"] = self.peak_worker_rss_bytes
            return figures
        finally:
            self.client.close()

    # -- phases ---------------------------------------------------------------------------------

    def _load(self, *, fresh: bool = True) -> float:
        """Seconds from asking for the load to ModelLoaded. `fresh`: the weights are read again
        (the worker would otherwise keep them for the same file and placement); the page cache
        stays warm, as it does for llama.cpp's own figure."""
        if fresh:
            self.client.unload()
            self._wait(p.Unloaded)
        c = self.config
        params = p.ModelParams(
            path=c.model,
            n_ctx=c.n_ctx,
            n_gpu_layers=c.gpu_layers,
            flash_attn=c.flash_attn,
            type_k=c.type_k,
            type_v=c.type_v,
            n_threads=c.threads,
            backend_sampling=c.backend_sampling,
            engine=c.engine,
        )
        sent = time.perf_counter()
        self.client.load(params)
        loaded = self._wait(p.ModelLoaded, p.LoadFailed)
        took = time.perf_counter() - sent
        if isinstance(loaded, p.LoadFailed):
            raise BenchFailed(loaded.message)
        if c.engine == "hearth" and loaded.engine != "hearth":
            # the worker fell back to llama.cpp: its figures would be reported as Hearth's
            raise BenchFailed(f"the Hearth engine did not run the model: {loaded.engine_note}")
        if loaded.weights_kept == fresh:
            raise BenchFailed(f"the worker {'kept' if fresh else 'reloaded'} the weights")
        self.n_vocab = loaded.n_vocab
        self.bandwidth_gbps, self.bandwidth_source = loaded.bandwidth_gbps, loaded.bandwidth_source
        self._note_peak()
        return took

    def _prefill(self) -> dict:
        # Untimed first, as llama-bench warms up each test: the first prompts of a shape after
        # a load run slower while the GPU's clocks rise and kernels load (measured on an H200:
        # 6,100 then 8,900 tok/s before a steady 10,150 for 512 tokens of an 8B Q4_K_M).
        self._generate(self._tokens(self.config.prompt_tokens), 1)
        rates, ttfts = [], []
        for _ in range(self.config.reps):
            sent = time.perf_counter()
            stats = self._generate(self._tokens(self.config.prompt_tokens), 1)
            ttfts.append(time.perf_counter() - sent)
            rates.append(stats.prefill_tokens_per_second)
        self._note_peak()
        return {
            "prefill_tok_s": statistics.median(rates),
            "time_to_first_token_s": statistics.median(ttfts),
        }

    def _decode(self, n: int, *, depth: int, reps: int | None = None) -> tuple[float, float]:
        """(median decode tok/s, the speed-of-light bound the worker gives those replies; 0
        where it knows none)."""
        self._generate(self._tokens(1), 16)  # untimed warm-up, as for the prefill
        rates, bounds = [], []
        for _ in range(reps or self.config.reps):
            stats = self._generate(self._tokens(max(1, depth)), n + 1)
            rates.append(stats.decode_tokens_per_second)
            bounds.append(stats.bound_tokens_per_second)
        self._note_peak()
        return statistics.median(rates), statistics.median(bounds)

    # -- plumbing -------------------------------------------------------------------------------

    def _tokens(self, n: int) -> tuple[int, ...]:
        # Ids from the middle of the vocabulary: ordinary text pieces, not control tokens.
        low, high = self.n_vocab // 8, self.n_vocab * 7 // 8
        return tuple(self.rng.randrange(low, high) for _ in range(n))

    def _generate(self, prompt: tuple[int, ...], max_tokens: int) -> p.GenerationStats:
        request_id = self.client.generate(
            prompt_tokens=prompt, sampling=GREEDY, max_tokens=max_tokens, ignore_eos=True
        )
        while True:
            event = self._wait(p.GenerationDone, p.GenerationFailed, p.TokenText)
            if isinstance(event, p.TokenText):
                continue
            if isinstance(event, p.GenerationFailed) or event.request_id != request_id:
                raise BenchFailed(getattr(event, "message", str(event)))
            if event.stats.n_generated != max_tokens:
                raise BenchFailed(f"generated {event.stats.n_generated} of {max_tokens} tokens")
            return event.stats

    def _wait(self, *types):
        event = self.events.wait_for(*types, timeout=EVENT_TIMEOUT_S)
        if isinstance(event, EngineCrashed):
            tail = "\n".join(event.last_lines[-8:])
            raise BenchFailed(f"{event.message}\n{tail}")
        return event

    def _device_used(self) -> dict[str, int]:
        """Memory in use per GPU (the CPU device is the host's RAM: counted as the RSS)."""
        self.client.request_memory_report()
        report = self._wait(p.MemoryReport)
        self.peak_worker_rss_bytes = max(self.peak_worker_rss_bytes, report.process_rss_bytes)
        return {
            d.name: d.total_bytes - d.free_bytes
            for d in report.devices
            if d.total_bytes > 0 and not d.name.upper().startswith("CPU")
        }

    def _note_peak(self) -> None:
        for name, now in self._device_used().items():
            delta = now - self._device_baseline.get(name, 0)
            self.peak_device_bytes = max(self.peak_device_bytes, delta)
