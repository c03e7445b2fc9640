"""Host values put on the device without waiting there.

A plain copy from the host to a GPU waits for the device's stream, i.e. for every step already
launched; the batch decoder launches its next step before taking the last one's tokens
(engine/runtime/hearth_batch.py), so the small tensors it and the sampler build each step
(positions, rows, the draws' settings) are copied without that wait: CUDA stages the values
before the call returns, and the copy runs in stream order.
"""

from __future__ import annotations

import torch


def on_device(values: list, device, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """`values` as a tensor of `dtype` on `device`, the copy queued behind the launched work."""
    return torch.tensor(values, dtype=dtype).to(device, non_blocking=True)
