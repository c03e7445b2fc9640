"""The downloader against the fake Hub, with faults: after each, the library holds the exact
file (sha256 equal) or nothing, never a partial file."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.hub.control import CANCEL, PAUSE, StopFlag
from engine.hub.download import Downloader, RetryPolicy, part_path, write_all
from engine.hub.records import (
    ChecksumMismatch,
    DamagedFile,
    DiskFull,
    DownloadError,
    DownloadStopped,
    RemoteFile,
)
from tests.engine.hub.conftest import assert_exact_or_nothing, library_files, payload, sha256
from tests.engine.hub.fake_hub import Cut, FakeHub, IgnoreRange, Slow, Status

pytestmark = pytest.mark.timeout(60)

SIZE = 300 * 1024
# Short waits between tries, but a read timeout no busy machine reaches by accident: a spurious
# timeout is one more request, which changes which fault the next request meets.
FAST = RetryPolicy(attempts=3, first_delay_s=0.01, max_delay_s=0.05, read_timeout_s=10.0)
REPO = "org/model-GGUF"


def setup_file(hub: FakeHub, name: str = "model-Q4_K_M.gguf", size: int = SIZE, seed: int = 1):
    data = payload(size, seed)
    hub.add_repo(REPO, {name: data})
    return data, RemoteFile(REPO, name, len(data), sha256(data))


def run(file_or_files, models: Path, **kwargs) -> list[Path]:
    files = file_or_files if isinstance(file_or_files, list) else [file_or_files]
    kwargs.setdefault("policy", FAST)
    kwargs.setdefault("reserve_bytes", 0)
    downloader = Downloader(token=False, **kwargs)
    dests = [models / f.filename for f in files]
    return downloader.download(files, dests, models / ".quarantine")


def test_a_clean_download_is_exact_and_leaves_no_part(fake_hub: FakeHub, tmp_path: Path) -> None:
    data, file = setup_file(fake_hub)
    seen = []
    [path] = run(file, tmp_path, on_progress=seen.append)
    assert path.read_bytes() == data
    assert not part_path(path).exists()
    assert seen[-1].done_bytes == seen[-1].total_bytes == SIZE


@pytest.mark.parametrize("seed", range(4))
def test_cuts_at_random_offsets_resume_from_where_they_stopped(
    fake_hub: FakeHub, tmp_path: Path, seed: int
) -> None:
    data, file = setup_file(fake_hub, seed=seed)
    cuts = sorted(random.Random(seed).sample(range(1, SIZE), 4))
    fake_hub.add_faults(file.filename, *(Cut(at) for at in cuts))
    [path] = run(file, tmp_path)
    assert sha256(path.read_bytes()) == sha256(data)
    ranges = [r for _m, r, _s in fake_hub.resolve_requests(file.filename)]
    # each request after a cut starts exactly at the byte where the previous one stopped
    assert ranges == [None, *(f"bytes={at}-" for at in cuts)]


def test_a_flipped_byte_is_quarantined_and_never_promoted(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    data, file = setup_file(fake_hub)
    fake_hub.flip[file.filename] = 12345
    with pytest.raises(ChecksumMismatch, match="arrived damaged") as info:
        run(file, tmp_path)
    assert library_files(tmp_path) == {}
    assert not part_path(tmp_path / file.filename).exists()
    quarantined = Path(info.value.quarantined)
    assert quarantined.exists() and quarantined.stat().st_size == SIZE
    del fake_hub.flip[file.filename]
    [path] = run(file, tmp_path)  # a fresh try gets the good file
    assert path.read_bytes() == data


def test_500s_are_retried_with_backoff(fake_hub: FakeHub, tmp_path: Path) -> None:
    data, file = setup_file(fake_hub)
    fake_hub.add_faults(file.filename, Cut(1000), Status(500), Status(503))
    [path] = run(file, tmp_path)
    assert path.read_bytes() == data


@pytest.mark.parametrize("code", [500, 502, 416])
def test_persistent_errors_fail_clearly_and_keep_the_part(
    fake_hub: FakeHub, tmp_path: Path, code: int
) -> None:
    data, file = setup_file(fake_hub)
    fake_hub.add_faults(file.filename, Cut(50_000), *[Status(code)] * 10)
    with pytest.raises(DownloadError, match=rf"failed 4 times.*HTTP {code}.*resume") as info:
        run(file, tmp_path)
    assert info.value.part_kept
    part = part_path(tmp_path / file.filename)
    assert part.read_bytes() == data[:50_000]
    assert library_files(tmp_path) == {}
    fake_hub.faults.clear()
    [path] = run(file, tmp_path)  # the fault is gone: resume from byte 50,000
    assert path.read_bytes() == data
    assert fake_hub.resolve_requests(file.filename)[-1][1] == "bytes=50000-"


def test_a_stalled_body_times_out_and_is_retried(fake_hub: FakeHub, tmp_path: Path) -> None:
    data, file = setup_file(fake_hub)
    fake_hub.add_faults(file.filename, Slow(8.0))  # far past the timeout, busy machine or not
    policy = RetryPolicy(attempts=3, first_delay_s=0.01, read_timeout_s=2.0)
    [path] = run(file, tmp_path, policy=policy)
    assert path.read_bytes() == data
    assert len(fake_hub.resolve_requests(file.filename)) == 2


def test_a_server_that_ignores_the_range_restarts_from_zero(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    data, file = setup_file(fake_hub)
    fake_hub.add_faults(file.filename, Cut(70_000), IgnoreRange())
    [path] = run(file, tmp_path)
    assert path.read_bytes() == data


def test_a_part_left_by_an_earlier_run_is_resumed(fake_hub: FakeHub, tmp_path: Path) -> None:
    data, file = setup_file(fake_hub)
    part_path(tmp_path / file.filename).write_bytes(data[:123_456])
    [path] = run(file, tmp_path)
    assert path.read_bytes() == data
    assert [r for _m, r, _s in fake_hub.resolve_requests(file.filename)] == ["bytes=123456-"]


def test_a_not_found_file_fails_at_once(fake_hub: FakeHub, tmp_path: Path) -> None:
    _data, file = setup_file(fake_hub)
    fake_hub.add_faults(file.filename, Status(404))
    with pytest.raises(DownloadError, match=r"HTTP 404.*refresh"):
        run(file, tmp_path)
    assert len(fake_hub.resolve_requests(file.filename)) == 1


def test_a_file_that_changed_size_on_the_hub_is_refused(fake_hub: FakeHub, tmp_path: Path):
    _data, file = setup_file(fake_hub)
    stale = RemoteFile(file.repo_id, file.filename, file.size + 10, file.sha256)
    with pytest.raises(DownloadError, match="repository changed"):
        run(stale, tmp_path)
    assert library_files(tmp_path) == {}


def test_enospc_at_the_write_seam_stops_cleanly_then_resumes(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    data, file = setup_file(fake_hub)
    limit = {"left": 100_000}

    def small_disk(f, chunk: bytes) -> None:
        if len(chunk) > limit["left"]:
            write_all(f, chunk[: limit["left"]])
            limit["left"] = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        write_all(f, chunk)
        limit["left"] -= len(chunk)

    with pytest.raises(DiskFull, match=r"is full") as full:
        run(file, tmp_path, write=small_disk)
    part = part_path(tmp_path / file.filename)
    assert part.read_bytes() == data[:100_000]
    # the kept .part holds disk space too: how much, where, and how to get it back
    assert (full.value.part, full.value.part_bytes) == (str(part), 100_000)
    assert f"The 97.7 KiB received are kept in {part.name}" in full.value.message
    assert "free some space elsewhere and resume, or cancel the download to delete them" in (
        full.value.message
    )
    assert library_files(tmp_path) == {}
    [path] = run(file, tmp_path)
    assert path.read_bytes() == data


def test_free_space_is_checked_before_starting(fake_hub: FakeHub, tmp_path: Path) -> None:
    _data, file = setup_file(fake_hub)
    with pytest.raises(DiskFull, match="Not enough free disk space"):
        run(file, tmp_path, free_space=lambda _p: SIZE // 2)
    assert fake_hub.resolve_requests(file.filename) == []


def stop_when(condition: Callable[[], bool], stop: StopFlag, reason: str) -> None:
    """Request the stop as soon as `condition` holds, however long the download takes to get
    there.

    (A timer of 0.2 s assumed the download got there first. On a busy machine setting up the
    HTTP client alone took longer, the pause came before any byte, and no part was kept: 5 of 6
    runs failed with six other processes spinning on the 2 cores.)
    """

    def watch() -> None:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            if condition():
                stop.request(reason)
                return
            time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()


def test_pause_keeps_the_part_and_cancel_deletes_it(fake_hub: FakeHub, tmp_path: Path) -> None:
    data, file = setup_file(fake_hub)
    part = part_path(tmp_path / file.filename)
    for reason in (PAUSE, CANCEL):
        stop = StopFlag()
        fake_hub.add_faults(file.filename, Cut(40_000))  # then a long wait to retry...
        policy = RetryPolicy(attempts=3, first_delay_s=60.0)
        asked = len(fake_hub.resolve_requests(file.filename))

        def cut_and_waiting(asked: int = asked) -> bool:  # ...in which the stop comes
            answered = len(fake_hub.resolve_requests(file.filename)) > asked
            return answered and part.exists() and part.stat().st_size >= 40_000

        stop_when(cut_and_waiting, stop, reason)
        with pytest.raises(DownloadStopped) as info:
            run(file, tmp_path, stop=stop, policy=policy)
        assert info.value.reason == reason
        assert part.exists() == (reason == PAUSE)
        assert library_files(tmp_path) == {}
    [path] = run(file, tmp_path)
    assert path.read_bytes() == data


def test_a_split_set_is_verified_as_a_set(fake_hub: FakeHub, tmp_path: Path) -> None:
    names = [f"big-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    parts = {name: payload(100_000, seed=i) for i, name in enumerate(names)}
    fake_hub.add_repo(REPO, parts)
    files = [RemoteFile(REPO, n, len(d), sha256(d)) for n, d in parts.items()]
    fake_hub.flip[names[2]] = 5
    with pytest.raises(ChecksumMismatch):
        run(files, tmp_path)
    assert library_files(tmp_path) == {}  # the two good parts are not promoted alone
    assert part_path(tmp_path / names[0]).exists()  # they stay, verified, for the retry
    del fake_hub.flip[names[2]]
    fake_hub.add_faults(names[1], Cut(10))
    seen = []
    run(files, tmp_path, on_progress=seen.append)
    assert library_files(tmp_path) == parts
    verifying = [p.done_bytes for p in seen if p.phase == "verifying"]
    assert verifying == sorted(verifying) and verifying[-1] == 300_000  # over the whole set
    assert [r for _m, r, _s in fake_hub.resolve_requests(names[0])] == [None]  # fetched once


@pytest.mark.parametrize("seed", range(6))
def test_any_mix_of_faults_ends_exact_or_with_nothing(
    fake_hub: FakeHub, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(100 + seed)
    data, file = setup_file(fake_hub, seed=seed)
    menu = [lambda: Cut(rng.randrange(SIZE)), lambda: Status(rng.choice([500, 503, 416]))]
    fake_hub.add_faults(file.filename, *(rng.choice(menu)() for _ in range(rng.randrange(8))))
    if rng.random() < 0.3:
        fake_hub.flip[file.filename] = rng.randrange(SIZE)
    with contextlib.suppress(DownloadError):
        run(file, tmp_path)
    assert_exact_or_nothing(tmp_path, {file.filename: data})


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A 1 MiB tmpfs, where the machine lets us mount one (root in a container that allows it)."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
        timeout=10,
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here; the write-seam test covers ENOSPC instead")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False, timeout=10)


def test_a_really_full_disk_stops_cleanly(fake_hub: FakeHub, small_tmpfs: Path) -> None:
    data, file = setup_file(fake_hub, size=600 * 1024)
    filler = small_tmpfs / "filler"

    def fill_the_disk(progress) -> None:  # another program takes the space mid-download
        if progress.done_bytes and not filler.exists():
            with open(filler, "wb") as f, contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
                    os.fsync(f.fileno())

    with pytest.raises(DiskFull, match="is full"):
        run(file, small_tmpfs, on_progress=fill_the_disk)
    assert library_files(small_tmpfs) == {"filler": filler.read_bytes()}
    kept = part_path(small_tmpfs / file.filename).read_bytes()
    assert 0 < len(kept) < len(data) and kept == data[: len(kept)]
    filler.unlink()
    [path] = run(file, small_tmpfs)
    assert path.read_bytes() == data


def test_a_disk_too_small_is_refused_before_starting(fake_hub: FakeHub, small_tmpfs: Path):
    _data, file = setup_file(fake_hub, size=2 * 1024 * 1024)
    with pytest.raises(DiskFull, match="Not enough free disk space"):
        run(file, small_tmpfs)
    assert fake_hub.resolve_requests(file.filename) == []


def setup_unhashed_gguf(
    hub: FakeHub, trailing: bytes = b""
) -> tuple[bytes, RemoteFile, dict[str, int]]:
    """A real (tiny) GGUF the Hub lists with a size and no sha256 (and `trailing` bytes after
    its tensor data), and where its fields are."""
    from engine.hub.client import HubClient
    from tests.engine.gguf.craft import valid_model

    builder = valid_model()
    data = builder.bytes() + trailing
    hub.add_repo(REPO, {"tiny-Q8_0.gguf": data}, not_in_lfs={"tiny-Q8_0.gguf"})
    [model] = HubClient(token=False).repo_files(REPO).models
    assert model.files[0].sha256 is None
    return data, model.files[0], builder.marks


def test_without_a_sha256_a_changed_weight_byte_cannot_be_seen(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    """What the structural check does not promise: the file enters (and is marked unverified by
    the queue and the library, tests/engine/hub/test_queue.py)."""
    data, file, marks = setup_unhashed_gguf(fake_hub)
    fake_hub.flip[file.filename] = marks["data"] + 5
    [path] = run(file, tmp_path)
    assert path.read_bytes() != data and len(path.read_bytes()) == len(data)


@pytest.mark.parametrize(
    ("damage", "said"),
    [("magic", "GGUF header does not parse"), ("trailing", "tensor data ends at byte")],
)
def test_without_a_sha256_a_file_that_is_not_the_gguf_it_claims_is_quarantined(
    fake_hub: FakeHub, tmp_path: Path, damage: str, said: str
) -> None:
    # a flipped magic; or 4 KiB after the data that the header does not account for
    _data, file, _marks = setup_unhashed_gguf(
        fake_hub, bytes(4096) if damage == "trailing" else b""
    )
    if damage == "magic":
        fake_hub.flip[file.filename] = 0
    with pytest.raises(DamagedFile, match="Hub lists no sha256 for it") as damaged:
        run(file, tmp_path)
    assert said in damaged.value.message
    assert library_files(tmp_path) == {}
    assert Path(damaged.value.quarantined).parent == tmp_path / ".quarantine"
