"""Suggested models: the shipped catalogue is well formed; fits are planned from headers on the
(fake) Hub, the ones that fit ranked, gone entries skipped, and no connection said at once."""

from __future__ import annotations

import socket
import time

import pytest

from engine.hub.catalog import OTHER, ModelFile, quant_of
from engine.hub.client import HubClient, HubError
from engine.hub.fit import DOES_NOT_FIT, FITS, FITS_WITH_OFFLOAD, UNKNOWN, FitBadge
from engine.hub.records import RemoteFile
from engine.hub.suggestions import CatalogueEntry, Suggestion, load_catalogue, rank, suggest
from engine.planner import DeviceBudget, PlanRequest
from tests.engine.gguf.craft import valid_model
from tests.engine.hub.fake_hub import FakeHub, Sparse

pytestmark = pytest.mark.timeout(60)
HEADER = valid_model().bytes()
CARD = PlanRequest(gpus=(DeviceBudget("0", "card", "cuda", 8 << 30),), host_budget_bytes=8 << 30)
NO_ROOM = PlanRequest(gpus=(DeviceBudget("0", "card", "cuda", 1 << 20),), host_budget_bytes=1)


def test_the_shipped_catalogue_names_distinct_gguf_files_with_a_quant():
    entries = load_catalogue()
    assert 5 <= len(entries) <= 15
    assert len({(e.repo_id, e.filename) for e in entries}) == len(entries)
    for entry in entries:
        assert entry.filename.endswith(".gguf") and quant_of(entry.filename) != OTHER
        assert entry.repo_id.count("/") == 1 and entry.name and entry.why


def _suggestion(name: str, size: int, verdict: str, on_gpu: bool = False) -> Suggestion:
    remote = RemoteFile("org/r", f"{name}-Q4_K_M.gguf", size, None, "main")
    model = ModelFile(remote.filename, "Q4_K_M", (remote,))
    badge = FitBadge(verdict, "Fits" if on_gpu else "Fits (CPU)", "", on_gpu=on_gpu)
    return Suggestion(CatalogueEntry("org/r", remote.filename, name), model, badge)


def test_ranking_gpu_fits_largest_first_then_the_rest_smallest_first():
    picks = [
        _suggestion("gpu-small", 1, FITS, on_gpu=True),
        _suggestion("gpu-large", 5, FITS, on_gpu=True),
        _suggestion("offload-large", 9, FITS_WITH_OFFLOAD),
        _suggestion("offload-small", 7, FITS_WITH_OFFLOAD),
        _suggestion("too-big", 90, DOES_NOT_FIT),
        _suggestion("unreadable", 2, UNKNOWN),
    ]
    names = [s.entry.name for s in rank(picks)]
    assert names == ["gpu-large", "gpu-small", "offload-small", "offload-large"]
    assert len(rank(picks, limit=2)) == 2


def _entries(*names: str) -> list[CatalogueEntry]:
    return [CatalogueEntry(f"org/{n}-GGUF", f"{n}-Q4_K_M.gguf", n.title(), "why") for n in names]


def test_suggest_plans_each_from_its_header_and_skips_what_is_gone(fake_hub: FakeHub):
    fake_hub.add_repo("org/small-GGUF", {"small-Q4_K_M.gguf": HEADER})
    big = Sparse(HEADER, 5 * len(HEADER))  # the same model in a larger file
    fake_hub.add_repo("org/large-GGUF", {"large-Q4_K_M.gguf": big})
    entries = _entries("small", "gone", "large")  # "gone": not on the Hub (any more)
    picks = suggest(HubClient(token=False), CARD, entries)
    assert [s.entry.name for s in picks] == ["Large", "Small"]
    assert all(s.badge.verdict == FITS and s.badge.on_gpu for s in picks)
    assert picks[0].model.size == 5 * len(HEADER) and picks[0].model.first.sha256
    assert suggest(HubClient(token=False), NO_ROOM, entries) == []  # nothing fits: none


def test_suggest_without_a_connection_raises_at_once():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(HubError, match="No connection"):
        suggest(HubClient(endpoint=f"http://127.0.0.1:{port}", token=False), CARD, _entries("a"))
    assert time.monotonic() - started < 5.0
