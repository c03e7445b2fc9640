"""Ticket counters for a reduction finished inside the launch that produced its parts.

Each program of a split computation stores its part, then takes a ticket from an atomic counter;
the program that draws the last ticket reduces the parts and sets the counter back to zero, so
the next launch (or a CUDA graph's replay) finds it zeroed. Used by the split-K GEMV
(kernels/gemv.py) and the fused decode reduce (kernels/decode_launch.py), each with a buffer of
its own.
"""

from __future__ import annotations

import torch


class TicketCounters:
    """Zeroed int32 counters, one buffer per device, grown only when too small (so that CUDA
    graph captures keep reusing it); one stream at a time may use a buffer."""

    def __init__(self, minimum: int):
        self.minimum = minimum
        self._by_device: dict[torch.device, torch.Tensor] = {}

    def get(self, device: torch.device, n: int) -> torch.Tensor:
        """At least n zeroed counters on `device` ("cuda" and "cuda:N" are the same buffer)."""
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        counters = self._by_device.get(device)
        if counters is None or counters.numel() < n:
            counters = torch.zeros(max(n, self.minimum), dtype=torch.int32, device=device)
            self._by_device[device] = counters
        return counters
