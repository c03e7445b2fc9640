"""What a split's host step reads, written to pinned host memory by the GPU in one launch.

A decode step whose experts are split between ggml and the GPU (engine/hearth/staged_experts.py)
pauses after each such layer's router: the host needs the layer's normed activations x (as
float32: ggml's input), the token's expert ids and their routing weights. One program loads
the three on the GPU and stores them, converted, straight into the host's pinned buffers over
the bus (posted writes), where three device-to-host copies each waited for the one before and
the host converted x after them. The host reads the buffers once it has seen the piece's end
(an event after this launch), when the launch's writes have reached host memory.

    write_to_host(x, ids, weights, x_host, ids_host, weights_host)
        # x [1, n] float, ids [1, k] integer, weights [1, k] float on the GPU;
        # x_host [1, n] float32, ids_host [1, k] int32, weights_host [1, k] float32 pinned

`write_to_host_torch` is the reference and the CPU's path: the same values by torch's copies.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.availability import require


@triton.jit
def _write_to_host_kernel(x_ptr, ids_ptr, w_ptr, x_out, ids_out, w_out, n, k,
                          BLOCK: tl.constexpr, K_PAD: tl.constexpr):  # fmt: skip
    at = tl.arange(0, BLOCK)
    mask = at < n
    tl.store(x_out + at, tl.load(x_ptr + at, mask=mask).to(tl.float32), mask=mask)
    j = tl.arange(0, K_PAD)
    pick = j < k
    tl.store(ids_out + j, tl.load(ids_ptr + j, mask=pick).to(tl.int32), mask=pick)
    tl.store(w_out + j, tl.load(w_ptr + j, mask=pick).to(tl.float32), mask=pick)


def write_to_host(x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
                  x_host: torch.Tensor, ids_host: torch.Tensor,
                  weights_host: torch.Tensor) -> None:  # fmt: skip
    """x, ids and weights into the host's buffers (module docstring): one launch of one
    program, queued in the current stream."""
    require()
    _check(x, ids, weights, x_host, ids_host, weights_host)
    n, k = x.shape[1], ids.shape[1]
    _write_to_host_kernel[(1,)](
        x, ids, weights, x_host, ids_host, weights_host, n, k,
        BLOCK=triton.next_power_of_2(n), K_PAD=max(2, triton.next_power_of_2(k)), num_warps=4,
    )  # fmt: skip


def write_to_host_torch(x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
                        x_host: torch.Tensor, ids_host: torch.Tensor,
                        weights_host: torch.Tensor) -> None:  # fmt: skip
    """write_to_host by torch's copies (the reference, and the CPU's path)."""
    _check(x, ids, weights, x_host, ids_host, weights_host)
    x_host.copy_(x.float())
    ids_host.copy_(ids.to(torch.int32))
    weights_host.copy_(weights.float())


def _check(x, ids, weights, x_host, ids_host, weights_host) -> None:
    if x.dim() != 2 or x.shape[0] != 1 or ids.shape != weights.shape or ids.shape[0] != 1:
        raise ValueError(
            f"one token's x {tuple(x.shape)}, ids {tuple(ids.shape)} and weights "
            f"{tuple(weights.shape)}: pass [1, n], [1, k] and [1, k]"
        )
    if (x_host.dtype, ids_host.dtype, weights_host.dtype) != (
        torch.float32, torch.int32, torch.float32,
    ):  # fmt: skip
        raise ValueError("the host's buffers: x float32, ids int32, weights float32")
    if x_host.shape != x.shape or ids_host.shape != ids.shape or weights_host.shape != ids.shape:
        raise ValueError("the host's buffers must have the shapes of x, ids and weights")
    tensors = (x, ids, weights, x_host, ids_host, weights_host)
    if not all(t.is_contiguous() for t in tensors):
        raise ValueError("x, ids, weights and the host's buffers must be contiguous")
