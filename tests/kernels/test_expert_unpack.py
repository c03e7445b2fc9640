"""kernels/expert_unpack.py: staged experts (each expert's tensors side by side) laid out
tensor by tensor over the slots, against the torch loop and against a layout built by hand."""

import pytest
import torch

from kernels.expert_unpack import UnpackTable, unpack_slots, unpack_slots_torch


def _layout(sizes, gap=0):
    """Source offsets side by side in a row; destination offsets of 4 slots each, gap apart."""
    src, dst, at, out = [], [], 0, 0
    for size in sizes:
        src.append(at)
        dst.append(out)
        at += size
        out += 4 * size + gap
    return src, dst, at, out


@pytest.mark.parametrize(
    "sizes, gap",
    [
        ((4096, 12288, 512, 8192), 256),  # words: a Qwen3 expert's planes, scaled down
        ((6, 10, 3), 1),  # bytes: a size that is no multiple of 4
    ],
)
def test_each_slot_s_tensor_lands_at_its_offset(device, sizes, gap):
    src, dst, row, total = _layout(sizes, gap)
    table = UnpackTable.of(sizes, src, dst, device)
    assert table.word == (4 if gap % 4 == 0 else 1)
    staged = torch.randint(0, 255, (4, row), dtype=torch.uint8, device=device)
    planes = torch.zeros(total, dtype=torch.uint8, device=device)
    unpack_slots(staged, planes, table, 3)
    expected = torch.zeros_like(planes)
    for size, s, d in zip(sizes, src, dst, strict=True):
        for slot in range(3):
            expected[d + slot * size : d + (slot + 1) * size] = staged[slot, s : s + size]
    assert torch.equal(planes.cpu(), expected.cpu())  # slot 3 left alone: only 3 asked
    reference = torch.zeros_like(planes)
    unpack_slots_torch(staged, reference, table, 3)
    assert torch.equal(reference.cpu(), expected.cpu())


def test_a_table_past_the_buffers_is_refused():
    table = UnpackTable.of((8,), (0,), (0,), "cpu")
    with pytest.raises(ValueError, match="past the staged row"):
        unpack_slots_torch(
            torch.zeros(2, 4, dtype=torch.uint8), torch.zeros(16, dtype=torch.uint8), table, 2
        )
    with pytest.raises(ValueError, match="past the planes buffer"):
        unpack_slots_torch(
            torch.zeros(2, 8, dtype=torch.uint8), torch.zeros(12, dtype=torch.uint8), table, 2
        )
