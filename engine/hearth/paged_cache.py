"""kernels.PagedKVCache behind the two calls the forward pass makes of a cache (write, attend).

One sequence per context. Keys arrive already rotated by RoPE (forward.py applies it), so the
write kernel only rotates (Walsh-Hadamard, for the rot formats), quantizes and stores them.
A decode step (one query) is kernels' flash-decoding attention over the stored pages; a
prefill chunk reads the stored rows back and lets torch attend (correct, slow: the rows come
back through kernels' numpy reference). What kernels/ does not offer yet, and so what this
adapter cannot do:
- attention limited to a sliding window (Gemma 3): such models keep the plain f16 cache;
- dropping a sequence's tail: `truncate` can only go back to nothing, so a chat turn that does
  not extend the cached tokens exactly is computed from the start (generation.py does that
  when `forget_from` says no);
- a fast prefill attention over stored pages, and a decode launch whose grid does not depend
  on the length (what a CUDA graph needs).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Hearth KV formats (kernels/kv_formats.py) a ModelParams.type_k / type_v may name.
PAGED_FORMATS = ("q8", "rot4", "rot2")


class PagedCacheAdapter:
    def __init__(
        self,
        *,
        n_layer: int,
        n_head_kv: int,
        head_dim: int,
        n_ctx: int,
        device: torch.device | str,
        k_format: str,
        v_format: str,
        page_size: int = 64,
    ):
        import kernels

        spec = kernels.KVCacheSpec(
            n_layers=n_layer,
            n_kv_heads=n_head_kv,
            head_dim=head_dim,
            k_format=k_format,
            v_format=v_format,
            page_size=page_size,
            max_tokens=n_ctx,
        )
        self.cache = kernels.PagedKVCache(spec, device=device)
        self.spec = spec
        self.n_ctx = n_ctx
        self.seq = self.cache.new_sequence()

    @property
    def nbytes(self) -> int:
        return self.spec.bytes_per_token * self.spec.n_layers * self.n_ctx

    @property
    def length(self) -> int:
        return self.cache.length(self.seq)

    def truncate(self, n: int) -> bool:
        """Keep the first n positions; only n equal to the length, or 0, can be done."""
        if n == self.length:
            return True
        if n == 0:
            self.cache.free_sequence(self.seq)
            self.seq = self.cache.new_sequence()
            return True
        return False

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        start = int(positions[0])  # a host number: kernels' write takes the start position
        if layer == 0:
            if start != self.length:
                raise ValueError(f"paged cache: writing at {start}, the sequence has {self.length}")
            self.cache.grow(self.seq, len(positions))
        self.cache.write(layer, self.seq, start, k.to(torch.float16), v.to(torch.float16))

    def attend(self, layer, q, positions, n_keys, *, scale: float, window: int = 0):
        if window:
            raise ValueError("kernels' paged attention has no sliding window yet")
        if q.shape[0] == 1:
            out = self.cache.attend(layer, q.to(torch.float16), [self.seq], scale=scale)
            return out.to(q.dtype)
        k, v = self.cache.read_rows(layer, self.seq)
        keys = torch.from_numpy(k).to(q.device, q.dtype).transpose(0, 1)
        values = torch.from_numpy(v).to(q.device, q.dtype).transpose(0, 1)
        slots = torch.arange(keys.shape[1], device=q.device)
        seen = slots[None, :] <= positions[:, None]
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1), keys, values, attn_mask=seen, scale=scale, enable_gqa=True
        )
        return out.transpose(0, 1)
