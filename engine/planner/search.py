"""The fit search: for every candidate file, KV type and flash-attention setting, the most
offloaded placement that fits the minimum context, the longest context it then allows, and the
placement that reaches the target context; the preference picks among them.

Memory on the GPUs falls as the offload level rises (layers, or MoE experts, moved to RAM) and
grows with the context, so both are found by bisection: about 30 costings per combination,
each O(devices) thanks to engine/planner/tables.py. Contexts are multiples of 256, as llama.cpp
pads them anyway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.enums import KV_TYPES
from engine.planner.backends import BACKENDS, BackendProfile
from engine.planner.kv_cache import CTX_PAD, pad_to, type_fits_width
from engine.planner.memory import Config, MemoryEstimate, estimate, layer_counts, layer_ranges
from engine.planner.profile import ModelProfile
from engine.planner.records import PlanRequest, min_tokens_per_second
from engine.planner.remote_link import device_backend, network_seconds_per_token
from engine.planner.speed import bytes_read_per_token, tokens_per_second

DEFAULT_TARGET_CTX = 32768  # when the request names none: the training context, at most this
KV_RANK = {kv: len(KV_TYPES) - 1 - i for i, kv in enumerate(KV_TYPES)}  # f16 best
SPEED_STEP = 1.03  # speeds within one step of each other rank as equal
KV_PAIRS = tuple((kv, kv) for kv in KV_TYPES)  # matching pairs only


@dataclass(frozen=True)
class Candidate:
    profile: ModelProfile
    config: Config
    estimate: MemoryEstimate
    tokens_per_second: float
    placement_speed: float  # tokens/s counting weight reads only: what the placement decides


@dataclass(frozen=True)
class Miss:
    """The leanest placement of one combination, when even it does not fit."""

    profile: ModelProfile
    config: Config
    estimate: MemoryEstimate
    shortfall: int


class Search:
    def __init__(self, request: PlanRequest) -> None:
        self.request = request
        self.gpus: tuple[BackendProfile, ...] = tuple(device_backend(g) for g in request.gpus)
        self.budgets = tuple(g.budget_bytes for g in request.gpus)
        self.candidates: list[Candidate] = []
        self.misses: list[Miss] = []
        self._estimates: dict[tuple[int, Config], MemoryEstimate] = {}

    # -- costing ---------------------------------------------------------------------------------

    def estimate(self, profile: ModelProfile, config: Config) -> MemoryEstimate:
        return estimate(profile, config, self.gpus)

    def shortfall(self, est: MemoryEstimate) -> int:
        """Bytes over budget on the worst device (<= 0: it fits)."""
        worst = -(2**62)
        for mem, budget in zip(est.gpus, self.budgets, strict=True):
            worst = max(worst, mem.total - budget)
        if self.request.host_budget_bytes is not None:
            worst = max(worst, est.host.total - self.request.host_budget_bytes)
        return worst

    def over_budget(self, est: MemoryEstimate) -> list[tuple[str, int]]:
        """(device name, bytes over) for every device the estimate does not fit."""
        out = [
            (gpu.name, mem.total - gpu.budget_bytes)
            for gpu, mem in zip(self.request.gpus, est.gpus, strict=True)
            if mem.total > gpu.budget_bytes
        ]
        host = self.request.host_budget_bytes
        if host is not None and est.host.total > host:
            out.append(("system RAM", est.host.total - host))
        return out

    def fits(self, profile: ModelProfile, config: Config, where: str = "all") -> bool:
        """Whether `config` fits the GPUs ("gpus"), the host RAM ("host") or both ("all")."""
        key = (id(profile), config)
        est = self._estimates.get(key)
        if est is None:
            est = self._estimates[key] = self.estimate(profile, config)
        if where != "host":
            for mem, budget in zip(est.gpus, self.budgets, strict=True):
                if mem.total > budget:
                    return False
        host = self.request.host_budget_bytes
        return where == "gpus" or host is None or est.host.total <= host

    def speed(self, profile: ModelProfile, config: Config, kv: bool = True) -> float:
        n = profile.n_layer
        ngl = max(0, min(config.n_gpu_layers, n + 1)) if self.gpus else 0
        ranges = layer_ranges(n, ngl, config.gpu_layer_counts or layer_counts(ngl, len(self.gpus)))
        per_gpu, host = bytes_read_per_token(profile, config, ranges, self.gpus, kv=kv)
        speed = tokens_per_second(
            per_gpu,
            host,
            self.gpus,
            [g.bandwidth_gbps for g in self.request.gpus],
            self.request.host_bandwidth_gbps,
        )
        network = network_seconds_per_token(profile, config.n_ctx, ranges, self.request.gpus)
        return speed if network == 0.0 else 1.0 / (1.0 / speed + network)

    # -- the space -------------------------------------------------------------------------------

    def target_ctx(self, profile: ModelProfile) -> int:
        wanted = self.request.target_ctx or min(profile.n_ctx_train, DEFAULT_TARGET_CTX)
        return pad_to(max(CTX_PAD, wanted), CTX_PAD)

    def min_ctx(self, profile: ModelProfile) -> int:
        return min(pad_to(max(CTX_PAD, self.request.min_ctx), CTX_PAD), self.target_ctx(profile))

    def levels(self, profile: ModelProfile) -> list[tuple[int, int]]:
        """(n_gpu_layers, n_cpu_expert_layers), from everything on the GPUs to nothing."""
        n = profile.n_layer
        if not self.gpus:
            return [(0, 0)]
        levels = [(n + 1, 0)]
        experts = 0
        if profile.is_moe and self.request.allow_cpu_experts:
            levels += [(n + 1, e) for e in range(1, n + 1)]
            experts = n
        if self.request.allow_cpu_layers:
            levels += [(ngl, experts) for ngl in range(n, -1, -1)]
        return levels

    def combos(self, profile: ModelProfile) -> list[tuple[str, str, bool]]:
        fa_options = {"on": [True], "off": [False]}.get(self.request.flash_attn, [True, False])
        out = []
        for type_k, type_v in KV_PAIRS:
            if type_k not in self.request.kv_types:
                continue
            if not all(type_fits_width(t, w) for t, w in _widths(profile, type_k, type_v)):
                continue
            for fa in fa_options:
                if fa and not self.flash_attn_supported(profile, type_k, type_v):
                    continue
                if not fa and type_v != "f16":
                    continue  # llama_context: "quantized V cache ... requires Flash Attention"
                if not fa and self.request.flash_attn == "auto" and out and out[-1][2]:
                    continue  # where flash attention runs, it never needs more memory
                out.append((type_k, type_v, fa))
        return out

    def flash_attn_supported(self, profile: ModelProfile, type_k: str, type_v: str) -> bool:
        devices = self.gpus or (BACKENDS["cpu"],)
        return all(
            (type_k, type_v) in b.fa_pairs
            and profile.head_dim_k == profile.head_dim_v
            and profile.head_dim_k in b.fa_head_dims
            for b in devices
        )

    def config(self, profile, combo, level, n_ctx) -> Config:
        ngl, experts = level
        weights = [max(1, b - BACKENDS["cuda"].context_bytes) for b in self.budgets]
        counts = layer_counts(ngl, len(self.gpus), weights) if self.gpus else ()
        return Config(
            n_ctx=n_ctx,
            type_k=combo[0],
            type_v=combo[1],
            flash_attn=combo[2],
            n_gpu_layers=ngl,
            n_cpu_expert_layers=experts,
            gpu_layer_counts=counts,
            n_ubatch=min(self.request.n_ubatch, self.request.n_batch),
            swa_full=self.request.swa_full,
            n_outputs_max=1 if self.request.lean_outputs else 0,
        )

    # -- the search ------------------------------------------------------------------------------

    def run(self, profiles: Sequence[ModelProfile]) -> None:
        for profile in profiles:
            for combo in self.combos(profile):
                self._search_combo(profile, combo)

    def _search_combo(self, profile: ModelProfile, combo) -> None:
        """Candidates for one file and KV/flash-attention combination.

        GPU memory falls and host memory grows as the level rises, so at a given context the
        levels that fit form an interval [first, last], found by bisection on each side. The
        candidates: `first` (fastest), the first level reaching the target context, `last`
        (most room on the GPU), the slowest level above the speed floor, the slowest level as
        fast as `first`, and, when host memory binds too, the level where GPU room and host
        room for context cross (where the longest context lies)."""
        levels = self.levels(profile)
        lo_ctx, target = self.min_ctx(profile), self.target_ctx(profile)
        n = len(levels)

        def fits(i: int, ctx: int, where: str = "all") -> bool:
            return self.fits(profile, self.config(profile, combo, levels[i], ctx), where)

        first = _first_true(n, lambda i: fits(i, lo_ctx, "gpus"))
        last = _last_true(n, lambda i: fits(i, lo_ctx, "host"))
        if first is None or last is None or first > last:
            index = first if first is not None else n - 1
            config = self.config(profile, combo, levels[index], lo_ctx)
            est = self.estimate(profile, config)
            self.misses.append(Miss(profile, config, est, self.shortfall(est)))
            return
        picks = [first]
        if self.longest(profile, combo, levels[first], lo_ctx, target) < target:
            span = last - first + 1
            reach = _first_true(span, lambda i: fits(first + i, target, "gpus"))
            if reach is not None:
                picks.append(first + reach)
            picks.append(last)
            floor = min_tokens_per_second(self.request)
            same = SPEED_STEP ** _speed_step(
                self._level_speed(profile, combo, levels[first], lo_ctx)
            )
            for bound in (floor, same * (1 - 1e-9)):
                slowest = _last_true(
                    span,
                    lambda i, b=bound: (
                        self._level_speed(profile, combo, levels[first + i], lo_ctx) >= b
                    ),
                )
                if slowest is not None:
                    picks.append(first + slowest)
            if self.request.host_budget_bytes is not None:
                picks.extend(
                    self._crossing(profile, combo, levels, first, last, lo_ctx, target, picks)
                )
        for i in dict.fromkeys(picks):
            self._add(profile, combo, levels[i], lo_ctx, target)

    def _level_speed(self, profile, combo, level, n_ctx: int) -> float:
        return self.speed(profile, self.config(profile, combo, level, n_ctx), kv=False)

    def _crossing(self, profile, combo, levels, first, last, lo_ctx, target, picks) -> list[int]:
        """Levels around where the GPU's room for context (growing with the level) meets the
        host's (shrinking): the longest context over [first, last] is there; also that
        crossing capped at each speed-limited pick."""

        def room(i: int, where: str) -> int:
            return self.longest(profile, combo, levels[i], lo_ctx, target, where)

        if room(last, "gpus") <= room(last, "host"):
            return []  # the GPUs limit the context even at `last`, which is already a pick
        cross = first + (
            _first_true(
                last - first + 1, lambda i: room(first + i, "gpus") >= room(first + i, "host")
            )
            or 0
        )
        out = [cross, max(first, cross - 1)]
        out += [min(cross, p) for p in picks] + [min(max(first, cross - 1), p) for p in picks]
        return out

    def longest(self, profile, combo, level, lo_ctx: int, hi_ctx: int, where: str = "all") -> int:
        """The longest context (a multiple of 256 in [lo_ctx, hi_ctx]) that fits at `level`."""
        steps = (hi_ctx - lo_ctx) // CTX_PAD
        last = _last_true(
            steps + 1,
            lambda i: self.fits(
                profile, self.config(profile, combo, level, lo_ctx + i * CTX_PAD), where
            ),
        )
        return lo_ctx + (last or 0) * CTX_PAD

    def _add(self, profile, combo, level, lo_ctx: int, hi_ctx: int) -> int:
        """Add the longest-context candidate at `level`; returns its context (0: none fits)."""
        n_ctx = self.longest(profile, combo, level, lo_ctx, hi_ctx)
        config = self.config(profile, combo, level, n_ctx)
        if any(c.config == config and c.profile is profile for c in self.candidates):
            return n_ctx
        est = self.estimate(profile, config)
        if self.shortfall(est) > 0:
            return 0
        speeds = self.speed(profile, config), self.speed(profile, config, kv=False)
        self.candidates.append(Candidate(profile, config, est, *speeds))
        return n_ctx


def rank_key(request: PlanRequest, target_of: Callable[[ModelProfile], int]):
    """The sort key for a preference: larger is better.

    Speed is compared in 3% steps of the placement's speed (weights only), so that the KV type
    is chosen for quality and context, not for the few percent its reads cost; the speed floor
    applies to it too, which keeps it independent of the context. f16 and q8_0 caches count as
    one quality tier (q8_0 is close to lossless), q4_0 as a lower one."""
    floor = min_tokens_per_second(request)

    def key(c: Candidate):
        speed_ok = c.placement_speed >= floor
        ctx = min(c.config.n_ctx, target_of(c.profile))
        quality = round(c.profile.bits_per_weight, 2)
        kv_tier = min(KV_RANK[c.config.type_k], KV_RANK[c.config.type_v], 1)
        kv = KV_RANK[c.config.type_k] + KV_RANK[c.config.type_v]
        fast = _speed_step(c.placement_speed)
        lean = -c.estimate.gpus[0].total if c.estimate.gpus else -c.estimate.host.total
        tail = (kv, c.config.flash_attn, lean)
        if request.preference == "context":
            return (speed_ok, ctx, quality, kv_tier, fast, *tail)
        if request.preference == "speed":
            return (fast, ctx, quality, kv_tier, *tail)
        return (speed_ok, quality, ctx, kv_tier, fast, *tail)

    return key


def _speed_step(tokens_per_second: float) -> int:
    return math.floor(math.log(max(tokens_per_second, 1e-9)) / math.log(SPEED_STEP))


def _widths(profile: ModelProfile, type_k: str, type_v: str):
    for layer in profile.kv_layers:
        if layer.has_kv:
            yield type_k, layer.k_width
            if layer.v_width:
                yield type_v, layer.v_width


def _first_true(n: int, pred: Callable[[int], bool]) -> int | None:
    """Smallest i in [0, n) with pred(i), pred assumed monotone (False... then True...)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo if lo < n and pred(lo) else None


def _last_true(n: int, pred: Callable[[int], bool]) -> int | None:
    """Largest i in [0, n) with pred(i), pred assumed monotone (True... then False...)."""
    lo, hi = -1, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo if lo >= 0 else None
