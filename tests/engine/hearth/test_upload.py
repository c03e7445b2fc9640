"""engine/hearth/upload.py: file ranges arrive byte for byte, across chunk and buffer reuse."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.hearth.upload import N_BUFFERS, FileUploader


@pytest.fixture
def data_file(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, size=300_001, dtype=np.uint8)
    path = tmp_path / "blob.bin"
    path.write_bytes(data.tobytes())
    return path, data


@pytest.mark.parametrize(
    "offset,n_bytes",
    [(0, 1), (0, 4096), (17, 4096 * 3 + 5), (123, 100_000), (299_000, 1_001), (0, 300_001)],
)
def test_a_range_arrives_exactly(data_file, offset, n_bytes):
    path, data = data_file
    with FileUploader(str(path), "cpu", chunk_bytes=4096) as upload:
        got = upload.read(offset, n_bytes)
    assert got.dtype == torch.uint8 and got.numel() == n_bytes
    np.testing.assert_array_equal(got.numpy(), data[offset : offset + n_bytes])


def test_many_reads_reuse_the_buffers_without_mixing_them(data_file):
    path, data = data_file
    ranges = [(i * 7001, 5000 + i * 333) for i in range(4 * N_BUFFERS)]
    with FileUploader(str(path), "cpu", chunk_bytes=3000) as upload:
        pieces = [upload.read(offset, n) for offset, n in ranges]
    for (offset, n), piece in zip(ranges, pieces, strict=True):
        np.testing.assert_array_equal(piece.numpy(), data[offset : offset + n])


def test_a_range_past_the_end_of_the_file_says_so(data_file):
    path, _ = data_file
    with (
        FileUploader(str(path), "cpu", chunk_bytes=4096) as upload,
        pytest.raises(OSError, match="ended early"),
    ):
        upload.read(299_990, 100)


@pytest.mark.gpu
def test_on_the_gpu_the_bytes_match_the_file(data_file):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    path, data = data_file
    with FileUploader(str(path), "cuda", chunk_bytes=4096) as upload:
        pieces = [upload.read(i * 1000, 40_000) for i in range(20)]
    for i, piece in enumerate(pieces):
        assert piece.device.type == "cuda"
        np.testing.assert_array_equal(piece.cpu().numpy(), data[i * 1000 : i * 1000 + 40_000])
