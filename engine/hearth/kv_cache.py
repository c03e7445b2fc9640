"""A plain-torch KV cache, and attention over it: the CPU path and the stand-in for kernels/.

One preallocated tensor per K and V, [n_layer, n_kv_heads, n_ctx, head_dim], in f16 by default
(llama.cpp's default cache type, so the two engines round keys and values alike). Writing puts a
chunk's keys and values at their positions; attention reads the first `n_keys` slots. A decode
step that passes n_keys = n_ctx (every slot, the unwritten ones masked out by position) has the
same shapes at every step, which is what a CUDA graph needs; prefill passes just the written
length. kernels.PagedKVCache replaces this on the GPU with the same two calls.

A lossy cache format is simulated by `codec`s: functions applied to K or V rows before they are
stored (quantize then dequantize, e.g. kernels.kv_formats.reference_roundtrip). The quality
benchmark (benchmarks/kv_quality.py) measures formats this way on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Codec = Callable[[torch.Tensor], torch.Tensor]


class TorchKVCache:
    def __init__(
        self,
        *,
        n_layer: int,
        n_head_kv: int,
        head_dim: int,
        n_ctx: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float16,
        k_codec: Codec | None = None,
        v_codec: Codec | None = None,
    ):
        shape = (n_layer, n_head_kv, n_ctx, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.n_ctx = n_ctx
        self.k_codec, self.v_codec = k_codec, v_codec

    @property
    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    @classmethod
    def over_rows(cls, k: torch.Tensor, v: torch.Tensor) -> TorchKVCache:
        """A one-layer cache holding k, v [n_kv_heads, n, head_dim] (one sequence's rows
        gathered from a paged pool, engine/hearth/batch_cache.py), so that they are attended
        exactly as a sequence of this cache is."""
        cache = cls.__new__(cls)
        cache.k, cache.v, cache.n_ctx = k[None], v[None], k.shape[1]
        cache.k_codec = cache.v_codec = None
        return cache

    def truncate(self, n: int) -> bool:
        """Keep the first n positions: nothing to do, since attention masks by position."""
        return True

    def rows_checkable(self, position: int) -> int:
        """How many positions from `position` on one speculative check may write and read as
        decode steps would (engine/hearth/verify.py): all that are left."""
        return self.n_ctx - position

    def attend_rows(self, layer, q, positions, n_keys: list[int], **options):
        """Each of q's T rows attended as a decode step at its position attends it, over
        n_keys[t] slots (a speculative check: engine/hearth/verify.py): row by row."""
        rows = [
            self.attend(layer, q[t : t + 1], positions[t : t + 1], n_keys[t], **options)
            for t in range(q.shape[0])
        ]
        return torch.cat(rows)

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """Store k, v [T, n_kv_heads, head_dim] at `positions` [T]."""
        if self.k_codec is not None:
            k = self.k_codec(k)
        if self.v_codec is not None:
            v = self.v_codec(v)
        self.k[layer].index_copy_(1, positions, k.transpose(0, 1).to(self.k.dtype))
        self.v[layer].index_copy_(1, positions, v.transpose(0, 1).to(self.v.dtype))

    def attend(
        self,
        layer: int,
        q: torch.Tensor,
        positions: torch.Tensor,
        n_keys: int,
        *,
        scale: float,
        window: int = 0,
        sinks: torch.Tensor | None = None,
        masks: dict | None = None,
    ) -> torch.Tensor:
        """softmax(q k^T * scale + mask) v for q [T, n_heads, head_dim] at `positions`, over
        slots 0..n_keys-1: a query at position p sees slot j when j <= p and, with a sliding
        `window`, p - j < window (llama.cpp's standard SWA mask). Returns [T, n_heads, head_dim].
        `sinks` [n_heads] (gpt-oss): one more logit per head in each softmax's denominator, a
        key that every query sees and whose value is zero.

        masks: a dict the forward pass keeps for one chunk (its layers attend from the same
        positions over the same slots): the chunk's additive mask is made by the first layer
        that asks for it and taken from there by the rest, one per window. None: made for this
        call alone.
        """
        if q.shape[0] == 1:
            return self._attend_one(layer, q, positions, n_keys, scale, window, sinks)
        keys = self.k[layer, :, :n_keys].to(q.dtype)
        values = self.v[layer, :, :n_keys].to(q.dtype)
        if sinks is not None:
            seen = _seen(positions, n_keys, window)
            return attention_with_sinks(q, keys, values, seen, scale, sinks)
        # Imported here: `import kernels` loads triton, which must not happen before the tests
        # (and a CPU-only run) have chosen its interpreter.
        from kernels.grouped_attention import grouped_prefill_attention, prefill_mask

        key = (window, n_keys)
        mask = masks.get(key) if masks is not None else None
        if mask is None:
            group = q.shape[1] // keys.shape[0]
            mask = prefill_mask(_seen(positions, n_keys, window), group, q.dtype)
            if masks is not None:
                masks[key] = mask
        return grouped_prefill_attention(q, keys, values, mask, scale)

    def _attend_one(self, layer, q, positions, n_keys, scale: float, window: int, sinks=None):
        """One query (a decode step): two batched products over the KV heads, each reading the
        cache once. SDPA would repeat K and V per query head for grouped-query attention, or
        refuse the mask; here the heads that share a KV head are one [G, D] block."""
        keys = self.k[layer, :, :n_keys]  # [n_kv_heads, n, D]
        values = self.v[layer, :, :n_keys]
        n_kv, head_dim = keys.shape[0], keys.shape[-1]
        q_groups = (q * scale).reshape(n_kv, -1, head_dim).to(keys.dtype)
        scores = torch.bmm(q_groups, keys.transpose(1, 2))  # [n_kv_heads, G, n]
        slots = self._slots(n_keys, q.device)
        seen = slots <= positions
        if window > 0:
            seen &= positions - slots < window
        scores = torch.where(seen, scores, float("-inf"))
        if sinks is not None:  # the sink's column takes its share of the softmax, then goes
            sink = sinks.view(n_kv, -1, 1).to(scores.dtype)
            probs = torch.softmax(torch.cat((scores, sink), -1), dim=-1, dtype=torch.float32)
            probs = probs[..., :-1].to(values.dtype)
        else:
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(values.dtype)
        return torch.bmm(probs, values).reshape(q.shape).to(q.dtype)

    def _slots(self, n: int, device) -> torch.Tensor:
        """0..n-1 on the device, made once (a decode step in a graph reuses it)."""
        slots = getattr(self, "_slot_ids", None)
        if slots is None or slots.numel() < n:
            slots = self._slot_ids = torch.arange(self.n_ctx, device=device)
        return slots[:n]


def _seen(positions: torch.Tensor, n_keys: int, window: int) -> torch.Tensor:
    """[T, n_keys] bool: slot j is seen from position p when j <= p (and p - j < window)."""
    slots = torch.arange(n_keys, device=positions.device)
    seen = slots[None, :] <= positions[:, None]
    if window > 0:
        seen &= positions[:, None] - slots[None, :] < window
    return seen


def attention_with_sinks(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    seen: torch.Tensor,
    scale: float,
    sinks: torch.Tensor,
) -> torch.Tensor:
    """Attention whose softmax has one more logit per head, `sinks` [n_heads] (ggml's
    soft_max_add_sinks), over keys and values [n_kv_heads, n_keys, D] heads first, `seen`
    [T, n_keys]; q [T, n_heads, D] -> [T, n_heads, D]. The scores are built in full (SDPA has
    no place for the extra logit): for prefill chunks of models that have sinks."""
    n_tokens, n_heads = q.shape[:2]
    group = n_heads // keys.shape[0]
    k = keys.repeat_interleave(group, dim=0).float()  # query head h reads KV head h // group
    v = values.repeat_interleave(group, dim=0).float()
    scores = torch.einsum("thd,hnd->htn", q.float(), k) * scale
    scores = scores.masked_fill(~seen[None], float("-inf"))
    sink = sinks.float().view(n_heads, 1, 1).expand(n_heads, n_tokens, 1)
    probs = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
    return torch.einsum("htn,hnd->thd", probs, v).to(q.dtype)
