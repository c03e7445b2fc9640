"""KIVI's residual cache in torch, for checks and quality measurements: a page (group of
positions) is quantized only once full, so a query sees the keys of its own, unfinished group
exactly and the earlier ones through a codec. tests/engine/hearth/test_paged_cache.py holds the
kivi4 paged cache to it; benchmarks/kv_quality.py scores 4-bit K layouts with it."""

from __future__ import annotations


def residual_cache(group: int, exact_values: bool = False, **cache_args):
    """A TorchKVCache that keeps both copies: a query sees its own group's keys exactly
    (j // group == p // group) and the earlier ones through the codecs; values likewise only
    with exact_values (kernels' kivi4 keeps K's open page exact, V is stored as it comes)."""
    import torch
    import torch.nn.functional as F

    from engine.hearth.kv_cache import TorchKVCache

    class ResidualCache(TorchKVCache):
        def __init__(self):
            super().__init__(**cache_args)
            self.exact_k, self.exact_v = torch.zeros_like(self.k), torch.zeros_like(self.v)

        def write(self, layer, positions, k, v):
            super().write(layer, positions, k, v)
            self.exact_k[layer].index_copy_(1, positions, k.transpose(0, 1).to(self.k.dtype))
            self.exact_v[layer].index_copy_(1, positions, v.transpose(0, 1).to(self.v.dtype))

        def attend(self, layer, q, positions, n_keys, *, scale, window=0, masks=None):
            # `masks` unused: this reference builds its whole scores and mask each call
            slots = torch.arange(n_keys, device=positions.device)
            behind = positions[:, None] - slots[None, :]
            seen = behind >= 0
            if window > 0:
                seen &= behind < window
            exact = seen & (slots[None, :] // group == positions[:, None] // group)
            stored = seen & ~exact
            qh = q.transpose(0, 1)  # [H, T, D]
            heads = qh.shape[0] // self.k.shape[1]

            def rows(t):
                return t[layer, :, :n_keys].to(q.dtype).repeat_interleave(heads, dim=0)

            k_e, v_e, k_s, v_s = (rows(t) for t in (self.exact_k, self.exact_v, self.k, self.v))
            s = torch.where(exact, qh @ k_e.transpose(1, 2), qh @ k_s.transpose(1, 2)) * scale
            p = F.softmax(s.masked_fill(~seen, float("-inf")), dim=-1)
            if not exact_values:
                v_e = v_s
            out = (p * exact) @ v_e + (p * stored) @ v_s
            return out.transpose(0, 1)

    return ResidualCache()
