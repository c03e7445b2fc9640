"""kernels.PagedKVCache behind the two calls the forward pass makes of a cache (write, attend).

One sequence per context, its pages all reserved at creation (the context's n_ctx), so a write
or a decode step never changes the block table. Positions reach the kernels as the device
tensor the forward pass already has: nothing is read back to the host, and a decode step
(write + attend of one token at every layer) can be captured once in a CUDA graph and replayed
at the next position. Attention masks by position, as TorchKVCache does, so rows past the
current length (an earlier, longer history) are never seen until rewritten: `truncate` is
always possible and costs nothing (kivi4 keys: it reopens the page of the last kept position,
one small launch a layer; kernels/kv_kivi.py).

A step's Q, K and V reach `write_rotating` as the GEMV made them: its one launch adds their
biases, norms and rotates Q's and K's heads by RoPE, rotates K and V (Walsh-Hadamard, for the rot
formats), quantizes and stores them, and returns the rotated queries (kernels/kv_write.py).
A decode step takes `attend_writing` instead where it can: the same work inside the attention's
own launch (kernels/decode_attention.py's WRITE), a launch a layer fewer.
`write` takes keys rotated already (a prefill chunk's, after RoPE's own launch: faster there).
A decode step (one query) is kernels' flash-decoding attention, with Gemma 3's sliding window
where the layer has one; a prefill chunk gathers the stored pages to f16 on the device and lets
torch's SDPA attend, under the chunk's additive mask, made at its first layer and shared by the
others.
"""

from __future__ import annotations

import torch

from engine.hearth.cache_layout import PAGE_SIZE


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
        page_size: int = PAGE_SIZE,
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
        self.cache = kernels.PagedKVCache(spec, device=device, open_pages=1)
        self.spec = spec
        self.n_ctx = n_ctx
        self.seq = self.cache.new_sequence()
        self.cache.grow(self.seq, n_ctx)

    @property
    def nbytes(self) -> int:
        pages = self.spec.bytes_per_token * self.spec.n_layers * self.n_ctx
        return pages + self.cache.open_page_bytes

    def truncate(self, n: int) -> bool:
        """Keep the first n positions: attention masks by position; kivi4 keys reopen the
        page of position n - 1 (its sealed rows become the open ones again)."""
        self.cache.reopen(self.seq, n)
        return True

    def rows_checkable(self, position: int) -> int:
        """How many positions from `position` on one speculative check may write and read as
        decode steps would (engine/hearth/verify.py): with kivi4 keys, up to the slot that
        seals the page (a decode step there seals it too, so alone it is one row)."""
        left = self.n_ctx - position
        if self.spec.k_format != "kivi4":
            return left
        page_size = self.spec.page_size
        return min(left, max(1, page_size - 1 - position % page_size))

    def write(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        positions = positions.to(self.cache.device)  # no copy where they already are
        self.cache.write(layer, self.seq, positions, k.to(torch.float16), v.to(torch.float16))

    def write_rotating(self, layer: int, positions: torch.Tensor, q, k, v, rope, *, biases=None,
                       norms=None) -> torch.Tensor:  # fmt: skip
        """q, k, v [T, heads, head_dim] as the Q/K/V GEMV made them: biases (bq, bk, bv, each
        float32 or None) added, Q's and K's heads normed (kernels.rope.QKNorms) and rotated
        (a kernels.Rope), K and V stored, in one launch (kernels/kv_write.py); returns the
        rotated queries in q's dtype."""
        positions = positions.to(self.cache.device)
        return self.cache.write(
            layer, self.seq, positions, k, v, rope, q=q, biases=biases, norms=norms
        )

    def attend_writing(self, layer: int, positions: torch.Tensor, q, k, v, rope, *,
                       biases=None, scale: float, window: int = 0, sinks=None, masks=None,
                       quantized=None) -> torch.Tensor | None:  # fmt: skip
        """A decode step's `write_rotating` (without head norms) and `attend` in one launch: q,
        k, v [1, heads, head_dim] as the Q/K/V GEMV made them, K and V written and q rotated
        by the attention's own launch (kernels' step_row), the same bits as the two calls; the
        attention's output. None where it cannot (queries not in f16, which the two calls
        would round twice): make the two calls."""
        import kernels

        if q.shape[0] != 1 or q.dtype != torch.float16:
            return None
        row = kernels.StepRow(k, v, rope, biases=biases)
        return self.cache.attend(
            layer, q, [self.seq], scale=scale, window=window,
            positions=positions.to(self.cache.device), sinks=sinks, quantized=quantized,
            step_row=row,
        )  # fmt: skip

    def attend_rows(self, layer, q, positions, n_keys: list[int], **options):
        """Each of q's T rows attended as a decode step at its position attends it (a
        speculative check: engine/hearth/verify.py), in one launch: the sequence given once per
        row, each split as a lone step's (kernels' splits_as_one). With attention sinks, row
        by row through `attend`."""
        if options.get("sinks") is not None or q.shape[0] == 1:
            rows = [
                self.attend(layer, q[t : t + 1], positions[t : t + 1], n_keys[t], **options)
                for t in range(q.shape[0])
            ]
            return torch.cat(rows)
        out = self.cache.attend(
            layer, q.to(torch.float16), [self.seq] * q.shape[0], scale=options["scale"],
            window=options.get("window", 0), positions=positions.to(self.cache.device),
            splits_as_one=True,
        )  # fmt: skip
        return out.to(q.dtype)

    @property
    def fills_quantized(self) -> bool:
        """Whether `attend` takes `quantized=` for a one-token q (what the forward pass asks):
        where a head holds whole groups of 32 values (the reduce quantizes a head at a time)."""
        return self.spec.head_dim % 32 == 0

    def attend(
        self, layer, q, positions, n_keys, *, scale: float, window: int = 0, sinks=None,
        masks: dict | None = None, quantized=None,
    ):  # fmt: skip
        """q [T, n_heads, head_dim] at `positions` [T]. One token: the decode kernel over the
        whole reserved cache (n_keys unused: the grid is the capacity's), gpt-oss's attention
        `sinks` in its reduce, and, given `quantized` (ops.empty_shared's buffers), the output
        in 8 bits written there by the same launch; more: the prefill path over positions
        0..n_keys-1, with the chunk's mask made once in `masks` (the forward pass's, one
        chunk's) and shared by its layers (kernels' attend_prefill), where with sinks the stored
        rows are gathered to f16 and attended in torch (kv_cache.attention_with_sinks)."""
        positions = positions.to(self.cache.device)
        if q.shape[0] == 1:
            out = self.cache.attend(
                layer, q.to(torch.float16), [self.seq], scale=scale, window=window,
                positions=positions, sinks=sinks, quantized=quantized,
            )  # fmt: skip
            return out.to(q.dtype)
        if quantized is not None:
            raise ValueError("8-bit output is for one query token (a decode step)")
        if sinks is not None:
            from engine.hearth.kv_cache import attention_with_sinks

            k, v = self.cache.gather(layer, self.seq, n_keys)
            slots = torch.arange(n_keys, device=positions.device)
            seen = slots[None, :] <= positions[:, None]
            if window > 0:
                seen &= positions[:, None] - slots[None, :] < window
            keys, values = k.transpose(0, 1), v.transpose(0, 1)
            return attention_with_sinks(q, keys, values, seen, scale, sinks)
        out = self.cache.attend_prefill(
            layer, q, self.seq, positions, n_keys, scale=scale, window=window, masks=masks
        )
        return out.to(q.dtype)


class PagedSequenceView(PagedCacheAdapter):
    """One sequence at a time of a batch's kernels.PagedKVCache, behind the same calls: a
    view sequence (PagedKVCache.new_view) whose block table `show` fills with that sequence's,
    so a CUDA graph captured through the view replays for any of the batch's prompts
    (engine/hearth/batch_chunks.py). `n_ctx`: the positions a sequence of the batch may reach
    (its share of the pool); the pool's pages are the batch cache's, never this view's."""

    def __init__(self, cache, n_ctx: int):
        self.cache, self.spec, self.n_ctx = cache, cache.spec, n_ctx
        self.seq = cache.new_view()

    @property
    def nbytes(self) -> int:
        return 0

    def show(self, seq: int) -> None:
        """Kernels launched through the view from now on (in stream order) read and write
        kernel sequence seq's pages."""
        self.cache.show(self.seq, seq)

    def truncate(self, n: int) -> bool:
        raise NotImplementedError("a view's sequence is truncated through its batch cache")

    def close(self) -> None:
        self.cache.free_sequence(self.seq)
