"""One decode step of the Hearth engine captured in a CUDA graph and replayed for every token.

A decode step of an 8B model is some 500 kernels of a few microseconds each; launched one by
one from Python, the launches and not the GPU set the pace. Captured once, the whole step
(the token's embedding row, every layer, the output matrix, the greedy pick) is one launch.

    step = DecodeGraph(model, cache, position=n_past)   # warms up (compiles), then captures
    logits, greedy = step.step(token, position, launch_ahead=False)
        # logits [vocab]: a static buffer, valid until the step after next; greedy: its argmax

Launching a graph of ~500 nodes still costs the host about half a millisecond, during which the
GPU waits for the next token's step, 10-15% of a step. So there are two graphs, A and B, each
of which ends by writing its greedy token and the next position into the other's inputs. With
`launch_ahead=True` (greedy sampling, where the next input is known to be that argmax) the
next step is launched before the host reads this one's token: the GPU goes from step to step while
the host reads tokens one behind. A later call with that very token and position takes the
step already in flight; any other call (a sampled token, a new prompt) launches afresh, and
the step launched ahead writes K and V, written at a position not yet visible to any query, are
overwritten. Each step still costs the host one wait, on its own event.

The embedding table is on the device (the tied output matrix itself where the model has one,
else a copy of its blocks as stored: 282 MB for Llama-3-8B's Q4_K table), so that a step's input
can come from the previous step; the prefill on a GPU reads its rows from the same table.

A model with experts in RAM split between ggml and the GPU (staged_experts.py) pauses the
step at each such layer; how it shares a token's picks is chosen here, before the capture, by
timing the step's replays at a few shares (split_tuning.py: 2.5-6 s at a load, longer
where a share's kernels compile first).

The cache must be one whose decode step can be captured (`can_capture`): fixed shapes at every
step and positions read from the device, never from the host. Warming up and capturing write K
and V at `position`: slots a later step overwrites before any query can see them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from engine.hearth import graph_pieces
from engine.hearth.expert_offload import ExpertsOnCpu, free_main_thread_openmp
from engine.hearth.forward import Transformer
from engine.hearth.kv_cache import TorchKVCache
from engine.hearth.split_tuning import SplitSetting, SplitTuning, tune
from engine.hearth.staged_experts import StagedExperts

STEPS_TIMED = 4  # a split setting's replays a turn while tuning (about 10 ms each)


def can_capture(cache) -> bool:
    """The plain cache (attention over all n_ctx slots, masked by position) and kernels' paged
    cache (its pages reserved at creation, its kernels' grids sized by the capacity, positions
    read on the device: engine/hearth/paged_cache.py) both decode with fixed shapes."""
    from engine.hearth.paged_cache import PagedCacheAdapter

    return isinstance(cache, TorchKVCache | PagedCacheAdapter)


class _Slot:
    """One of the two graphs: its static inputs and outputs, and an event at its end."""

    def __init__(self, device: torch.device):
        self.token = torch.zeros(1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.host_greedy = torch.zeros(1, dtype=torch.long, pin_memory=True)
        self.done = torch.cuda.Event()
        self.pieces: list[graph_pieces.Piece] = []  # one graph, or several with host steps
        self.logits: torch.Tensor | None = None


@dataclass
class _InFlight:
    slot: _Slot
    position: int
    token: int | None  # the input it was launched with, once the host knows it


class DecodeGraph:
    def __init__(self, model: Transformer, cache, *, position: int, tune_split: bool = True):
        """tune_split: choose a split's share by timing (split_tuning); False keeps the
        planned one (for measurements beside it)."""
        if not can_capture(cache):
            raise ValueError(f"{type(cache).__name__} cannot be captured in a CUDA graph")
        device = model.ops.device
        self.model, self.cache = model, cache
        self._table = model.device_embedding()
        self._slots = (_Slot(device), _Slot(device))
        for slot in self._slots:
            slot.position.fill_(position)
        # layers whose experts in RAM are split between ggml and copies: their share is
        # chosen by timing this step on this machine (split_tuning)
        self._staged = [
            layer.moe.experts
            for layer in model.layers
            if layer.moe is not None and isinstance(layer.moe.experts, StagedExperts)
        ]
        self.split_tuning: SplitTuning | None = None
        if self._staged and tune_split:
            self.split_tuning = self._tune_split(model.config.moe.n_expert_used)
        self._warm_up()
        for slot, other in (self._slots, self._slots[::-1]):
            slot.pieces, slot.logits = self._capture(slot, other)
        self._last = self._slots[1]  # the slot launched last
        self.waits = graph_pieces.Waits()  # the host's waits between pieces, for measurements
        self._ahead: _InFlight | None = None
        # layers whose experts ggml computes in the step's host nodes, on the driver's thread
        self._host_nodes = any(
            layer.moe is not None and isinstance(layer.moe.experts, ExpertsOnCpu)
            for layer in model.layers
        )

    def _warm_up(self) -> None:
        """The step run eagerly twice: every Triton kernel compiled before a capture."""
        device = self.model.ops.device
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(2):
                self._body(*self._slots)
        torch.cuda.current_stream(device).wait_stream(side)

    def _capture(self, slot: _Slot, other: _Slot):
        with torch.inference_mode():
            return graph_pieces.capture(lambda: self._body(slot, other), self.model.ops.device)

    def _tune_split(self, k: int) -> SplitTuning:
        """The split layers' share of the picks (and who issues the first copy) that steps
        fastest here: each share's step captured once, replayed STEPS_TIMED times a turn in
        split_tuning.tune's rounds, the captures dropped after."""
        began = time.perf_counter()
        device = self.model.ops.device
        first = self._staged[0]
        planned = SplitSetting(first.cpu_picks, first.early_copies)
        captured: dict[int, list[graph_pieces.Piece]] = {}

        def step_seconds(setting: SplitSetting) -> float:
            self._apply(setting)
            pieces = captured.get(setting.cpu_picks)
            if pieces is None:
                self._warm_up()  # this share's host buffers made, its kernels compiled
                pieces = captured[setting.cpu_picks] = self._capture(*self._slots)[0]
            torch.cuda.synchronize(device)
            started = time.perf_counter()
            for _ in range(STEPS_TIMED):
                graph_pieces.replay(pieces, device)
            torch.cuda.synchronize(device)
            return (time.perf_counter() - started) / STEPS_TIMED

        tuning = tune(planned, k, first.area.n_slots, step_seconds)
        self._apply(tuning.chosen)
        captured.clear()  # the graphs, and their memory, before the decode graph's own
        return dataclasses.replace(tuning, took_s=time.perf_counter() - began)

    def _apply(self, setting: SplitSetting) -> None:
        for experts in self._staged:
            experts.cpu_picks, experts.early_copies = setting.cpu_picks, setting.early_copies

    def _body(self, slot: _Slot, other: _Slot) -> torch.Tensor:
        h = self.model.embed_on_device(self._table, slot.token)
        logits = self.model.forward_embedded(h, slot.position, self.cache, n_keys=self.cache.n_ctx)[
            0
        ]
        greedy = torch.argmax(logits).view(1)
        other.token.copy_(greedy)  # the next step's input, should it be the greedy pick
        other.position.copy_(slot.position + 1)
        slot.host_greedy.copy_(greedy, non_blocking=True)
        return logits

    def _launch(self, slot: _Slot) -> None:
        if self._host_nodes:
            free_main_thread_openmp()  # (expert_offload: why)
        graph_pieces.replay(slot.pieces, self.model.ops.device, self.waits)
        slot.done.record()
        self._last = slot

    def _other(self, slot: _Slot) -> _Slot:
        return self._slots[1] if slot is self._slots[0] else self._slots[0]

    def forget_ahead(self) -> None:
        """Drop the step launched ahead: the history it continued has changed."""
        self._ahead = None

    def step(self, token: int, position: int, *, launch_ahead: bool) -> tuple[torch.Tensor, int]:
        """Run `token` at `position`; returns the logits [vocab] (a static buffer, valid until
        the step after next) and their argmax. `launch_ahead`: also launch the next step on that
        argmax before returning (see the module docstring)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and (ahead.token, ahead.position) == (token, position):
            slot = ahead.slot  # launched by the previous call, on this very token
        else:
            slot = self._other(self._last)
            slot.token.fill_(token)
            slot.position.fill_(position)
            self._launch(slot)
        if launch_ahead:
            following = self._other(slot)  # its inputs come from `slot`'s own last nodes
            self._launch(following)
            self._ahead = _InFlight(following, position + 1, None)
        slot.done.synchronize()
        greedy = int(slot.host_greedy[0])
        if self._ahead is not None:
            self._ahead.token = greedy
        return slot.logits, greedy

    def replay_seconds(self, n: int = 50) -> float:
        """One graph replayed n times back to back, no host work between: the GPU's own time
        per step (for measurements; writes K and V at that graph's position)."""
        slot = self._slots[0]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            graph_pieces.replay(slot.pieces, self.model.ops.device)
        end.record()
        end.synchronize()
        self._ahead = None
        return start.elapsed_time(end) / 1e3 / n
