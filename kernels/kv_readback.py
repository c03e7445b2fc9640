"""Stored KV pages back to rows on the host, through kv_formats' numpy reference (for tests,
benchmarks and the engine's quality checks; slow)."""

from __future__ import annotations

import numpy as np
import torch

from kernels.kv_formats import GROUP, KVCacheSpec, kivi_channel_order, reference_dequantize


def _unpack(codes: np.ndarray, bits: int) -> np.ndarray:
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    values = (codes[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return values.reshape(*codes.shape[:-1], -1)


def dequantize_pages(
    fmt: str, planes: dict[str, torch.Tensor], pages: list[int], spec: KVCacheSpec
) -> np.ndarray:
    """[len(pages) * page_size, n_kv_heads, head_dim] float32, unrotated."""
    index = torch.tensor(pages, dtype=torch.long, device=planes["q"].device)

    def take(name: str) -> np.ndarray:
        # [pages, heads, slots, ...] -> [pages * slots, heads, ...]
        field = planes[name].index_select(0, index).transpose(1, 2).cpu()
        return field.reshape(-1, *field.shape[2:]).numpy()

    if fmt == "f16":
        return take("q").astype(np.float32)
    if fmt == "q8":
        return reference_dequantize(fmt, {"q": take("q"), "scale": take("scale")[..., None]})
    codes = _unpack(take("q"), 4 if fmt == "rot4" else 2)
    groups = codes.reshape(*codes.shape[:-1], spec.head_dim // GROUP, GROUP)
    packed = {"q": groups, "scale": take("scale")[..., None], "min": take("min")[..., None]}
    return reference_dequantize(fmt, packed)


def dequantize_kivi_pages(
    planes: dict[str, torch.Tensor], pages: list[int], open_rows: torch.Tensor, open_page: int
) -> np.ndarray:
    """kivi4 K: [len(pages) * page_size, n_kv_heads, head_dim] float32, the sealed pages
    through the reference (scale and min per group of positions) and page number open_page
    from the open rows [heads, P, D]."""
    out = []
    # the stored scales and mins (even channels, then odd) back in channel order
    channels = kivi_channel_order(planes["scale"].shape[-1]).argsort()
    for i, page in enumerate(pages):
        if i == open_page:
            rows = open_rows.float().cpu().numpy()
        else:
            codes = _unpack(planes["q"][page].cpu().numpy(), 4)  # [heads, P, D]
            scale = planes["scale"][page].cpu().numpy()[..., channels]  # [heads, P / G, D]
            heads, groups, dim = scale.shape
            codes = codes.reshape(heads, groups, -1, dim)
            fields = {"q": codes, "scale": scale[:, :, None], "min": None}
            fields["min"] = planes["min"][page].cpu().numpy()[..., channels][:, :, None]
            rows = reference_dequantize("kivi4", fields).reshape(heads, -1, dim)
        out.append(rows.transpose(1, 0, 2))
    return np.concatenate(out)
