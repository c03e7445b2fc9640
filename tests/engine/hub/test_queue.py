"""The download queue: order, pause, resume, cancel, failures, and a restart mid-download."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.hub.catalog import ModelFile
from engine.hub.client import HubClient
from engine.hub.download import RetryPolicy, part_path
from engine.hub.paths import UnsafePath
from engine.hub.queue import CANCELLED, DONE, DOWNLOADING, FAILED, PAUSED, QUEUED, DownloadQueue
from engine.hub.records import RemoteFile
from tests.engine.hub.conftest import assert_exact_or_nothing, library_files, payload
from tests.engine.hub.fake_hub import Cut, FakeHub, Status

pytestmark = pytest.mark.timeout(60)
REPO = "org/q-GGUF"
# A read timeout no busy machine reaches by accident (a spurious retry shifts the faults).
FAST = RetryPolicy(attempts=2, first_delay_s=0.01, max_delay_s=0.02, read_timeout_s=10.0)
STUCK = RetryPolicy(attempts=3, first_delay_s=30.0)  # a retry waits: time to pause or quit


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


@pytest.fixture
def repo(fake_hub: FakeHub) -> dict[str, bytes]:
    files = {
        "a-Q4_K_M.gguf": payload(200_000, 1),
        "b-Q8_0-00001-of-00002.gguf": payload(150_000, 2),
        "b-Q8_0-00002-of-00002.gguf": payload(150_000, 3),
    }
    fake_hub.add_repo(REPO, files)
    return files


def models() -> dict[str, ModelFile]:
    return {m.quant: m for m in HubClient(token=False).repo_files(REPO).models}


def make_queue(tmp_path: Path, policy: RetryPolicy = FAST, **kwargs) -> DownloadQueue:
    queue = DownloadQueue(tmp_path / "models", token=False, policy=policy, **kwargs)
    queue._options = {"reserve_bytes": 0}
    return queue


def in_library(repo: dict[str, bytes]) -> dict[str, bytes]:
    return {f"org/q-GGUF/{name}": data for name, data in repo.items()}


def test_jobs_run_in_order_and_land_verified(fake_hub, repo, tmp_path: Path) -> None:
    done, states = [], []
    queue = make_queue(tmp_path, on_done=done.append, on_change=lambda j: states.append(j.state))
    found = models()
    first, second = queue.add(found["Q4_K_M"]), queue.add(found["Q8_0"])
    queue.start()
    try:
        wait_for(lambda: len(done) == 2)
    finally:
        queue.shutdown()
    assert [j.id for j in done] == [first.id, second.id]
    assert library_files(tmp_path / "models") == in_library(repo)
    assert states[:2] == [QUEUED, QUEUED] and DOWNLOADING in states and states[-1] == DONE
    assert first.progress is not None and first.progress.done_bytes == 200_000
    saved = json.loads(queue.state_path.read_text())
    assert saved["jobs"] == []  # finished jobs are not kept


def test_pause_resume_and_cancel(fake_hub, repo, tmp_path: Path) -> None:
    queue = make_queue(tmp_path, policy=STUCK)
    fake_hub.add_faults("a-Q4_K_M.gguf", Cut(80_000))
    job = queue.add(models()["Q4_K_M"])
    queue.start()
    try:
        wait_for(lambda: part_path(job.path).exists() and job.received_bytes() == 80_000)
        queue.pause(job.id)
        wait_for(lambda: job.state == PAUSED)
        assert job.received_bytes() == 80_000
        queue._policy = FAST
        queue.resume(job.id)
        wait_for(lambda: job.state == DONE)
        assert fake_hub.resolve_requests("a-Q4_K_M.gguf")[-1][1] == "bytes=80000-"

        fake_hub.add_faults("b-Q8_0-00001-of-00002.gguf", Cut(1000))
        queue._policy = STUCK
        other = queue.add(models()["Q8_0"])
        wait_for(lambda: other.received_bytes() == 1000)
        queue.cancel(other.id)
        wait_for(lambda: other.state == CANCELLED)
    finally:
        queue.shutdown()
    assert not part_path(other.path).exists()
    assert library_files(tmp_path / "models") == {"org/q-GGUF/a-Q4_K_M.gguf": repo["a-Q4_K_M.gguf"]}


def test_a_failure_says_why_keeps_the_part_and_can_be_retried(fake_hub, repo, tmp_path) -> None:
    queue = make_queue(tmp_path)
    fake_hub.add_faults("a-Q4_K_M.gguf", Cut(50_000), *[Status(500)] * 3)
    job = queue.add(models()["Q4_K_M"])
    queue.start()
    try:
        wait_for(lambda: job.state == FAILED)
        assert "HTTP 500" in job.message and "resume" in job.message
        assert job.received_bytes() == 50_000
        queue.resume(job.id)
        wait_for(lambda: job.state == DONE)
    finally:
        queue.shutdown()
    assert_exact_or_nothing(tmp_path / "models", in_library(repo))
    assert len(library_files(tmp_path / "models")) == 1


def test_a_restart_mid_download_resumes_by_range(fake_hub, repo, tmp_path: Path) -> None:
    first_run = make_queue(tmp_path, policy=STUCK)
    fake_hub.add_faults("a-Q4_K_M.gguf", Cut(120_000))
    job = first_run.add(models()["Q4_K_M"])
    first_run.add(models()["Q8_0"])
    first_run.start()
    wait_for(lambda: job.received_bytes() == 120_000)
    first_run.shutdown()  # the app quits mid-download
    saved = json.loads(first_run.state_path.read_text())
    assert [j["state"] for j in saved["jobs"]] == [QUEUED, QUEUED]

    done = []
    second_run = make_queue(tmp_path, on_done=done.append)
    restored = second_run.restore()
    assert [j.id for j in restored] == [j["id"] for j in saved["jobs"]]
    second_run.start()
    try:
        wait_for(lambda: len(done) == 2)
    finally:
        second_run.shutdown()
    assert fake_hub.resolve_requests("a-Q4_K_M.gguf")[-1][1] == "bytes=120000-"
    assert library_files(tmp_path / "models") == in_library(repo)


def test_unsafe_names_and_duplicates_are_refused(fake_hub, repo, tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    evil = RemoteFile(REPO, "../../evil.gguf", 10, "0" * 64)
    with pytest.raises(UnsafePath):
        queue.add(ModelFile("evil.gguf", "other", (evil,)))
    queue.add(models()["Q4_K_M"])
    with pytest.raises(ValueError, match="already in the download list"):
        queue.add(models()["Q4_K_M"])


def test_a_tampered_state_file_is_set_aside(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    job = {
        "id": "x", "repo_id": REPO, "name": "n", "quant": "Q4_0", "state": QUEUED,
        "files": [{"repo_id": REPO, "filename": "m.gguf", "size": 1, "sha256": None,
                   "revision": "main"}],
        "dests": [str(tmp_path / "outside.gguf")],
    }  # fmt: skip
    queue.state_path.parent.mkdir(parents=True)
    queue.state_path.write_text(json.dumps({"version": 1, "jobs": [job]}))
    assert queue.restore() == [] and queue.jobs() == []
    assert queue.state_path.with_suffix(".broken").exists()


def test_a_download_without_a_sha256_is_marked_unverified_in_the_job_and_the_library(
    fake_hub: FakeHub, repo: dict[str, bytes], tmp_path: Path
) -> None:
    from engine.hub.library import BY_SHA256, BY_STRUCTURE, Library
    from tests.engine.gguf.craft import valid_model

    builder = valid_model()
    fake_hub.add_repo(
        "org/mirror-GGUF", {"tiny-Q8_0.gguf": builder.bytes()}, not_in_lfs={"tiny-Q8_0.gguf"}
    )
    fake_hub.flip["tiny-Q8_0.gguf"] = builder.marks["data"] + 5  # a weight byte, unseen
    [unhashed] = HubClient(token=False).repo_files("org/mirror-GGUF").models
    done: list = []
    queue = make_queue(tmp_path, on_done=done.append)
    jobs = [queue.add(unhashed), queue.add(models()["Q4_K_M"])]
    queue.start()
    try:
        wait_for(lambda: len(done) == 2)
    finally:
        queue.shutdown()
    assert [j.state for j in jobs] == [DONE, DONE]
    assert not jobs[0].verified and jobs[0].message.startswith("Not verified: the Hub lists no")
    assert jobs[1].verified and jobs[1].message is None
    found = {m.repo_id: m for m in Library(tmp_path / "models", scan_hf_cache=False).scan()}
    assert found["org/mirror-GGUF"].verified_by == BY_STRUCTURE
    assert found["org/mirror-GGUF"].unverified
    assert found[REPO].verified_by == BY_SHA256 and not found[REPO].unverified
