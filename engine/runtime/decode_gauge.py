"""The worker's speed-of-light gauge for the loaded model: each reply's bound (bytes a decode step
reads / the bandwidth where the weights are; engine/hardware/speed_of_light.py).

Where the weights are decides the bandwidth:
- the Hearth engine on a GPU: measured there (a device copy through torch, which that engine
  has loaded already);
- everything on the CPU (either engine): measured in host memory (numpy);
- llama.cpp with every layer on one GPU: the card's published bandwidth (engine/hardware/
  bandwidth.py's table), since measuring would mean loading torch and a second CUDA context
  into a worker that has none;
- layers split between GPU and CPU, or over several GPUs: no single bound, no gauge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.enums import Engine
from engine.gguf import ModelInfo, read_model_info
from engine.hardware.bandwidth import from_table
from engine.hardware.copy_rate import measure_copy_rate
from engine.hardware.speed_of_light import (
    bound_tokens_per_second,
    kv_bytes_per_token,
    reply_depth,
    weight_bytes_per_token,
)

MEASURED = "measured copy rate"
PUBLISHED = "published bandwidth"
# the Hearth engine's description ends "(Hearth engine, cuda)" (hearth_driver.HearthModel)
_HEARTH_DEVICE = re.compile(r"\(Hearth engine, ([a-z]+)[^)]*\)\s*$")


def bandwidth_where_it_runs(
    engine: str, description: str, runs_on: tuple[str, ...], n_gpu_layers: int, n_layers: int
) -> tuple[float, str]:
    """(GB/s, MEASURED or PUBLISHED) for the device that holds the weights; (0.0, "") when
    there is no one device or no figure."""
    if engine == Engine.HEARTH:
        found = _HEARTH_DEVICE.search(description)
        device = found.group(1) if found else ""
        if device == "cuda":
            rate = measure_copy_rate("cuda")
            return (rate, MEASURED) if rate > 0 else (0.0, "")
        if device != "cpu":
            return 0.0, ""
    else:
        gpus = [name for name in runs_on if name != "CPU"]
        if gpus:
            if len(gpus) > 1 or "CPU" in runs_on or n_gpu_layers < n_layers:
                return 0.0, ""
            published = from_table(gpus[0].partition(": ")[2] or gpus[0])
            return (published, PUBLISHED) if published else (0.0, "")
    rate = measure_copy_rate("cpu")
    return (rate, MEASURED) if rate > 0 else (0.0, "")


@dataclass(frozen=True)
class DecodeGauge:
    info: ModelInfo
    type_k: str
    type_v: str
    bandwidth_gbps: float
    weight_bytes: int

    @classmethod
    def of(cls, path: str, type_k: str, type_v: str, bandwidth_gbps: float) -> DecodeGauge | None:
        if bandwidth_gbps <= 0:
            return None
        try:
            info = read_model_info(path)
            kv_bytes_per_token(info, 1, type_k, type_v)  # a cache type it cannot size: no gauge
        except Exception:  # a nicety: a reply must never fail for want of its gauge
            return None
        return cls(info, type_k, type_v, bandwidth_gbps, weight_bytes_per_token(info))

    def bound(self, n_prompt_tokens: int, n_generated: int) -> float:
        depth = reply_depth(n_prompt_tokens, n_generated)
        read = self.weight_bytes + kv_bytes_per_token(self.info, depth, self.type_k, self.type_v)
        return bound_tokens_per_second(read, self.bandwidth_gbps)
