"""engine/hearth/upload.py: file ranges arrive byte for byte, across chunk and slot reuse,
with a plan read ahead, taken in order, skipped, or left for ranges outside it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.hearth.upload import FileUploader


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


@pytest.mark.parametrize("n_slots,n_readers", [(1, 1), (2, 3), (5, 2)])
def test_many_reads_reuse_the_slots_without_mixing_them(data_file, n_slots, n_readers):
    path, data = data_file
    ranges = [(i * 7001, 5000 + i * 333) for i in range(12)]
    with FileUploader(
        str(path), "cpu", chunk_bytes=3000, n_slots=n_slots, n_readers=n_readers
    ) as upload:
        pieces = [upload.read(offset, n) for offset, n in ranges]
    for (offset, n), piece in zip(ranges, pieces, strict=True):
        np.testing.assert_array_equal(piece.numpy(), data[offset : offset + n])


def _read_planned(path, data, plan, asked, n_readers) -> int:
    """Ask for `asked` with `plan` read ahead; check every range's bytes; the aside reads."""
    with _planned(path, plan, n_readers=n_readers) as upload:
        pieces = [upload.read(offset, n) for offset, n in asked]
        aside = upload.reads_aside
    for (offset, n), piece in zip(asked, pieces, strict=True):
        np.testing.assert_array_equal(piece.numpy(), data[offset : offset + n])
    return aside


def _planned(path, plan, **kw):
    return FileUploader(str(path), "cpu", plan=plan, chunk_bytes=3000, n_slots=4, **kw)


def test_a_plan_taken_in_order_is_read_ahead_and_arrives_exactly(data_file):
    path, data = data_file
    plan = [(i * 9000 + 5, 4000 + i * 900) for i in range(25)]
    assert _read_planned(path, data, plan, plan, n_readers=3) == 0


def test_ranges_skipped_repeated_or_outside_the_plan_still_arrive_exactly(data_file):
    path, data = data_file
    plan = [(i * 10_000, 7000) for i in range(20)]
    asked = [plan[0], plan[3], plan[1], (123, 4567), plan[4], plan[4], plan[19], plan[2]]
    # read aside: plan[1] (passed), the unplanned range, plan[4] again and plan[2] (dropped)
    assert _read_planned(path, data, plan, asked, n_readers=2) == 4


def test_a_range_past_the_end_of_the_file_says_so(data_file):
    path, _ = data_file
    with (
        FileUploader(str(path), "cpu", chunk_bytes=4096) as upload,
        pytest.raises(OSError, match="ended early"),
    ):
        upload.read(299_990, 100)


def test_a_planned_range_past_the_end_says_so_when_asked_for_not_when_skipped(data_file):
    path, data = data_file
    plan = [(299_990, 100), (0, 5000), (299_000, 2000)]
    with _planned(path, plan, n_readers=2) as upload:
        got = upload.read(0, 5000)  # the bad range before it is skipped, not an error
        np.testing.assert_array_equal(got.numpy(), data[:5000])
        with pytest.raises(OSError, match="ended early"):
            upload.read(299_000, 2000)


def test_a_reader_that_fails_fails_the_read_instead_of_leaving_it_waiting(data_file, monkeypatch):
    path, _ = data_file

    def broken(self, slot, piece):
        raise RuntimeError("pinned memory could not be allocated")

    monkeypatch.setattr(FileUploader, "_read_piece", broken)
    with (
        _planned(path, [(0, 5000)], n_readers=2) as upload,
        pytest.raises(RuntimeError, match="pinned memory"),
    ):
        upload.read(0, 5000)


def test_closing_with_planned_ranges_never_asked_for_returns(data_file):
    path, data = data_file
    plan = [(i * 1000, 1000) for i in range(200)]
    upload = _planned(path, plan, n_readers=3)
    np.testing.assert_array_equal(upload.read(0, 1000).numpy(), data[:1000])
    upload.close()  # the readers are waiting on full slots: they must still stop
    assert all(not thread.is_alive() for thread in upload._readers)


@pytest.mark.gpu
def test_on_the_gpu_the_bytes_match_the_file(data_file):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    path, data = data_file
    plan = [(i * 1000, 40_000) for i in range(20)]
    with FileUploader(str(path), "cuda", plan=plan, chunk_bytes=4096) as upload:
        pieces = [upload.read(i * 1000, 40_000) for i in range(20)]
        extra = upload.read(5, 70_000)
    for i, piece in enumerate(pieces):
        assert piece.device.type == "cuda"
        np.testing.assert_array_equal(piece.cpu().numpy(), data[i * 1000 : i * 1000 + 40_000])
    np.testing.assert_array_equal(extra.cpu().numpy(), data[5:70_005])


def test_an_empty_planned_range_takes_nothing_from_the_next_one(data_file):
    path, data = data_file
    plan = [(0, 0), (100, 5000), (9000, 0), (9000, 3000)]
    assert _read_planned(path, data, plan, plan, n_readers=2) == 0


def test_the_plans_first_bytes_are_handed_to_the_kernels_read_ahead_at_once(data_file, monkeypatch):
    """Before any read: the plan's ranges in order, up to the budget (the last one cut), each
    a WILLNEED advice on the file; the bytes still arrive exactly."""
    import os

    from engine.hearth import upload

    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise here")
    advised = []
    real = os.posix_fadvise

    def record(fd, offset, n_bytes, advice):
        advised.append((offset, n_bytes, advice, os.fstat(fd).st_size))
        real(fd, offset, n_bytes, advice)

    monkeypatch.setattr(os, "posix_fadvise", record)
    monkeypatch.setattr(upload, "ADVISE_BYTES", 10_000)
    path, data = data_file
    plan = [(50_000, 4_000), (0, 5_000), (200_000, 8_000), (100, 10)]
    with FileUploader(str(path), "cpu", plan=plan) as uploader:
        uploader.advice.join(timeout=10)
        assert advised == [(50_000, 4_000, os.POSIX_FADV_WILLNEED, data.size),
                           (0, 5_000, os.POSIX_FADV_WILLNEED, data.size),
                           (200_000, 1_000, os.POSIX_FADV_WILLNEED, data.size)]  # fmt: skip
        for offset, n_bytes in plan:
            got = uploader.read(offset, n_bytes).numpy()
            np.testing.assert_array_equal(got, data[offset : offset + n_bytes])


def test_without_a_plan_nothing_is_advised(data_file):
    path, _ = data_file
    with FileUploader(str(path), "cpu") as uploader:
        assert uploader.advice is None
