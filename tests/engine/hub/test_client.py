"""Search and repository listings through huggingface_hub, against the fake Hub; no
connection is said in seconds."""

from __future__ import annotations

import socket
import time

import pytest

from engine.hub.catalog import OTHER, by_quant, group_model_files, quant_of
from engine.hub.client import HubClient, HubError, is_connection_problem
from engine.hub.records import RemoteFile
from tests.engine.hub.conftest import sha256
from tests.engine.hub.fake_hub import FakeHub

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Llama-3-8B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("model.Q8_0.gguf", "Q8_0"),
        ("gemma-3-12b-it-UD-Q4_K_XL.gguf", "Q4_K_XL"),
        ("qwen-iq2_xxs.gguf", "IQ2_XXS"),
        ("model-f16.gguf", "F16"),
        ("sub/folder/model-BF16-00001-of-00002.gguf", "BF16"),
        ("model-Q8_0-imatrix-Q4_0.gguf", "Q4_0"),
        ("README.gguf", OTHER),
        ("AQ4_K_M.gguf", OTHER),
    ],
)
def test_quantization_from_the_file_name(name: str, quant: str) -> None:
    assert quant_of(name) == quant


def remote(name: str, size: int = 10) -> RemoteFile:
    return RemoteFile("org/repo", name, size, "0" * 64)


def test_split_sets_are_one_entry_and_incomplete_sets_are_marked() -> None:
    files = [
        remote("big-Q8_0-00002-of-00003.gguf", 20),
        remote("big-Q8_0-00001-of-00003.gguf", 10),
        remote("big-Q8_0-00003-of-00003.gguf", 30),
        remote("big-Q4_K_M-00001-of-00002.gguf"),
        remote("small-Q4_K_M.gguf"),
        remote("mmproj-F16.gguf"),
        remote("README.md"),
    ]
    models = group_model_files(files)
    names = [m.name for m in models]
    assert names == [
        "big-Q4_K_M.gguf (2 parts)",
        "small-Q4_K_M.gguf",
        "big-Q8_0.gguf (3 parts)",
        "mmproj-F16.gguf",
    ]
    q8 = models[2]
    assert q8.is_split and q8.complete and q8.size == 60
    assert [f.filename for f in q8.files] == [f"big-Q8_0-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert not models[0].complete  # part 2 of 2 is missing from the repository
    assert models[3].projector
    assert list(by_quant(models)) == ["Q4_K_M", "Q8_0", "F16"]


def test_search_sorts_by_downloads_likes_or_recency(fake_hub: FakeHub) -> None:
    fake_hub.add_repo(
        "a/llama-GGUF", {}, downloads=5, likes=50, last_modified="2024-01-01T00:00:00.000Z"
    )
    fake_hub.add_repo(
        "b/llama-GGUF", {}, downloads=50, likes=5, last_modified="2025-06-01T00:00:00.000Z"
    )
    fake_hub.add_repo("c/llama-safetensors", {}, downloads=500, tags=["transformers"])
    fake_hub.add_repo("d/qwen-GGUF", {}, downloads=9)
    client = HubClient(token=False)
    assert [r.repo_id for r in client.search("llama")] == ["b/llama-GGUF", "a/llama-GGUF"]
    assert client.search("llama", sort="likes")[0].repo_id == "a/llama-GGUF"
    recent = client.search("llama", sort="recent")
    assert recent[0].repo_id == "b/llama-GGUF" and recent[0].last_modified.year == 2025
    assert recent[0].license == "apache-2.0" and recent[0].downloads == 50
    assert len(client.search("", limit=2)) == 2
    with pytest.raises(ValueError):
        client.search("x", sort="size")


def test_repo_files_carry_sizes_lfs_hashes_license_and_commit(fake_hub: FakeHub) -> None:
    parts = {f"m-Q8_0-0000{i}-of-00002.gguf": bytes([i]) * (100 * i) for i in (1, 2)}
    files = {"m-Q4_K_M.gguf": b"x" * 77, **parts, "README.md": b"hello"}
    fake_hub.add_repo("org/m-GGUF", files, license="llama3.1", sha="c" * 40)
    listing = HubClient(token=False).repo_files("org/m-GGUF")
    assert listing.license == "llama3.1" and listing.revision == "c" * 40
    q4, q8 = listing.models
    assert q4.quant == "Q4_K_M" and q4.size == 77 and q4.first.sha256 == sha256(b"x" * 77)
    assert q8.quant == "Q8_0" and q8.is_split and q8.size == 300
    assert all(f.revision == "c" * 40 for f in q8.files)


def test_failures_are_hub_errors_that_say_what_to_do(fake_hub: FakeHub) -> None:
    client = HubClient(token=False)
    with pytest.raises(HubError, match="no such repository"):
        client.repo_files("org/missing")
    fake_hub.api_status = 400
    with pytest.raises(HubError, match=r"search the Hub.*Check your connection"):
        client.search("llama")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens there once closed


def test_a_search_without_a_connection_says_so_at_once() -> None:
    client = HubClient(endpoint=f"http://127.0.0.1:{_closed_port()}", token=False)
    started = time.monotonic()
    with pytest.raises(HubError, match=r"^No connection to the Hugging Face Hub \(127.0.0.1\)"):
        client.search("llama")
    assert time.monotonic() - started < 3.0  # no retries with back-off (24 s before)


def test_a_hub_that_never_answers_is_no_connection_after_the_timeout(monkeypatch) -> None:
    monkeypatch.setattr("engine.hub.client.SEARCH_TIMEOUT_S", 0.5)
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        client = HubClient(endpoint=f"http://127.0.0.1:{silent.getsockname()[1]}", token=False)
        started = time.monotonic()
        with pytest.raises(HubError, match="No connection"):
            client.search("llama")
        assert time.monotonic() - started < 3.0


def test_connection_problems_are_told_from_hub_answers() -> None:
    assert is_connection_problem(ConnectionRefusedError(111, "refused"))
    assert is_connection_problem(socket.gaierror(-2, "Name or service not known"))
    wrapped = RuntimeError("request failed")
    wrapped.__cause__ = TimeoutError()
    assert is_connection_problem(wrapped)
    assert not is_connection_problem(ValueError("bad JSON"))


def test_file_metadata_from_head_gives_linked_size_and_sha256(fake_hub: FakeHub) -> None:
    data = b"y" * 1234
    fake_hub.add_repo("org/m-GGUF", {"m-Q4_0.gguf": data})
    meta = HubClient(token=False).file_metadata("org/m-GGUF", "m-Q4_0.gguf")
    assert (meta.size, meta.sha256) == (1234, sha256(data))
    assert [m for m, *_ in fake_hub.requests] == ["HEAD"]  # no body was fetched


@pytest.mark.parametrize(
    "names, picked",
    [
        (["m-Q4_K_M.gguf", "mmproj-BF16.gguf", "mmproj-F16.gguf"], "mmproj-F16.gguf"),
        (["m-Q4_K_M.gguf", "m-Q8_0.gguf"], None),
    ],
)
def test_the_projector_to_download_with_a_model_of_the_listing(names, picked) -> None:
    from engine.hub.catalog import projector_for

    chosen = projector_for(group_model_files([remote(n) for n in names]))
    assert (chosen.name if chosen else None) == picked
