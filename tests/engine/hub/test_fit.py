"""Fit badges from remote headers: only the header crosses the wire, the planner decides."""

from __future__ import annotations

import pytest

from engine.gguf import read_model_info
from engine.hub.client import HubClient
from engine.hub.fit import DOES_NOT_FIT, FITS, FITS_WITH_OFFLOAD, UNKNOWN, fit_badge
from engine.planner import DeviceBudget, PlanRequest
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.engine.hub.fake_hub import FakeHub, Sparse

pytestmark = pytest.mark.timeout(60)
GIB = 1024**3


@pytest.fixture(scope="module")
def llama_8b_header(tmp_path_factory: pytest.TempPathFactory) -> Sparse:
    path = write_sparse_gguf(
        tmp_path_factory.mktemp("fit") / "m.gguf", SHAPES["llama3-8b"], "Q4_K_M"
    )
    info = read_model_info(path)
    with open(path, "rb") as f:
        return Sparse(f.read(info.header_bytes), info.file_size)


def card(gib: float, ram_gib: float = 64) -> PlanRequest:
    gpu = DeviceBudget("0", f"{gib:g} GiB card", "cuda", int(gib * GIB), 500.0)
    return PlanRequest(gpus=(gpu,), host_budget_bytes=int(ram_gib * GIB), target_ctx=8192)


@pytest.fixture
def listing(fake_hub: FakeHub, llama_8b_header: Sparse):
    fake_hub.add_repo(
        "org/llama-GGUF",
        {
            "llama-Q4_K_M.gguf": llama_8b_header,
            "twice-Q4_K_M-00001-of-00002.gguf": llama_8b_header,
            "twice-Q4_K_M-00002-of-00002.gguf": llama_8b_header,
            "half-Q4_K_M-00001-of-00002.gguf": llama_8b_header,
            "bad-Q4_0.gguf": b"not a gguf at all",
        },
    )
    return {m.name: m for m in HubClient(token=False).repo_files("org/llama-GGUF").models}


@pytest.mark.parametrize(
    ("request_", "verdict", "text"),
    [
        (card(16), FITS, "All on the GPU with 8,192 tokens"),
        (card(3), FITS_WITH_OFFLOAD, "layers on GPU"),
        (card(1, ram_gib=1), DOES_NOT_FIT, "needs"),
    ],
)
def test_badges_come_from_the_remote_header(
    fake_hub: FakeHub, listing, request_, verdict: str, text: str
) -> None:
    badge = fit_badge(listing["llama-Q4_K_M.gguf"], request_)
    assert badge.verdict == verdict and text in badge.detail
    body_bytes = [r for m, p, r, s in fake_hub.requests if p.endswith("llama-Q4_K_M.gguf")]
    assert body_bytes and all(r and r.startswith("bytes=") for r in body_bytes)  # ranges only
    assert badge.plan is not None and badge.plan.reasons


def test_a_split_set_is_planned_with_all_its_parts(listing) -> None:
    request = card(7)
    assert fit_badge(listing["llama-Q4_K_M.gguf"], request).verdict == FITS
    both = fit_badge(listing["twice-Q4_K_M.gguf (2 parts)"], request)
    assert both.verdict == FITS_WITH_OFFLOAD  # twice the weights no longer fit on the card


def test_unreadable_or_incomplete_models_get_an_unknown_badge(listing) -> None:
    bad = fit_badge(listing["bad-Q4_0.gguf"], card(16))
    assert bad.verdict == UNKNOWN and "Could not read the header" in bad.detail
    half = fit_badge(listing["half-Q4_K_M.gguf (2 parts)"], card(16))
    assert half.verdict == UNKNOWN and "missing" in half.detail


def test_cpu_only_requests_say_so(listing) -> None:
    badge = fit_badge(listing["llama-Q4_K_M.gguf"], PlanRequest(host_budget_bytes=64 * GIB))
    assert badge.verdict == FITS and badge.text == "Fits (CPU)"


def test_a_hostile_listed_name_gets_a_refused_badge_and_no_request(fake_hub: FakeHub) -> None:
    from engine.hub.catalog import ModelFile
    from engine.hub.records import RemoteFile

    file = RemoteFile("org/llama-GGUF", "%2e%2e/%2e%2e/etc/passwd.gguf", 1000, None)
    badge = fit_badge(ModelFile("passwd.gguf", "Q4_0", (file,)), card(16))
    assert badge.verdict == UNKNOWN and badge.text == "Refused" and "Refused" in badge.detail
    assert fake_hub.requests == []
