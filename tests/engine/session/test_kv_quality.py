"""The built-in KV check: its figures kept per file, what hurts a model, and Best fit leaving
that out for this model only."""

from __future__ import annotations

import os

import pytest

from engine.planner import PlanRequest
from engine.session import plan_load
from engine.session.kv_quality import (
    HURTS_KL,
    KvResult,
    cached,
    check_refusal,
    plan_filter,
    store,
    summary_text,
    with_kv_check,
)
from tests.engine.session.conftest import cpu, machine, nvidia

CHECKED = {
    ("llama", "f16", "f16"): KvResult(0.0, 1.0, 384, 4.0),
    ("llama", "q8_0", "q8_0"): KvResult(0.004, 0.95, 384, 4.0),
    ("llama", "q4_0", "q4_0"): KvResult(0.09, 0.80, 384, 4.0),
    ("hearth", "q8", "q8"): KvResult(0.003, 0.96, 384, 6.0),
    ("hearth", "rot4", "rot4"): KvResult(0.08, 0.82, 384, 6.0),
}


def test_results_are_kept_per_file_and_forgotten_when_it_changes(tmp_path):
    model, where = tmp_path / "m.gguf", tmp_path / "kv.json"
    model.write_bytes(b"GGUF one")
    assert cached(model, where) == {}
    store(model, CHECKED, where)
    assert cached(model, where) == CHECKED
    model.write_bytes(b"GGUF two, longer")  # replaced: checked again
    os.utime(model, ns=(1, 1))
    assert cached(model, where) == {}


def test_a_damaged_cache_file_counts_as_unchecked(tmp_path):
    model, where = tmp_path / "m.gguf", tmp_path / "kv.json"
    model.write_bytes(b"GGUF")
    where.write_text("{not json")
    assert cached(model, where) == {}


@pytest.mark.parametrize(
    ("kl", "hurts"), [(0.0, False), (HURTS_KL, False), (HURTS_KL * 1.01, True), (0.5, True)]
)
def test_what_hurts(kl, hurts):
    assert KvResult(kl, 0.9, 384, 1.0).hurts is hurts


def test_the_filter_and_the_request():
    assert plan_filter(CHECKED) == (("q4_0",), (("rot4", "rot4"),))
    request = with_kv_check(PlanRequest(), CHECKED)
    assert request.kv_types == ("f16", "q8_0")
    assert request.hearth_pairs_left_out == (("rot4", "rot4"),)
    assert with_kv_check(PlanRequest(), {}) == PlanRequest()


def test_the_summary_says_what_hurts():
    text = summary_text(CHECKED)
    assert text.startswith("KV quality for this model (mean KL against f16 over 384 tokens): ")
    assert "q8_0 0.0040, q4_0 0.0900 (hurts this model: Best fit leaves it out)" in text
    assert "Hearth q8/q8 0.0030, Hearth rot4/rot4 0.0800 (hurts" in text
    assert text.endswith("Checked in 10.0 s.")


def test_large_files_and_the_off_switch_are_refused_with_the_reason(tmp_path, monkeypatch):
    small = tmp_path / "small.gguf"
    small.write_bytes(b"GGUF")
    monkeypatch.setenv("HEARTH_KV_CHECK", "1")
    assert check_refusal(small) is None
    big = tmp_path / "big.gguf"
    with open(big, "wb") as f:
        f.truncate(3 * 1024**3)  # a hole: no disk used
    assert "up to 2 GiB (big.gguf is 3.0 GiB)" in check_refusal(big)
    monkeypatch.setenv("HEARTH_KV_CHECK", "0")
    assert "off" in check_refusal(small)


def test_best_fit_leaves_out_a_type_that_hurts_this_model(model_file):
    # Gemma-3-12B on a 12 GiB card, filled: q4_0 reaches its 128k training context
    path = model_file("gemma3-12b", "Q4_K_M")
    pc = machine(nvidia(11.5, 12, cc="7.5"), cpu(32))  # 7.5: llama.cpp only
    before = plan_load(path, pc, fill_gpu=True)
    assert before.params.type_k == "q4_0"
    store(path, {("llama", "q4_0", "q4_0"): KvResult(0.1, 0.8, 384, 3.0)})
    after = plan_load(path, pc, fill_gpu=True)
    assert after.fits and after.params.type_k in ("f16", "q8_0")
    assert after.params.n_ctx < before.params.n_ctx
    other = model_file("mistral-7b", "Q4_K_M")  # this model only
    assert cached(other) == {}
