"""engine/runtime/logit_trace.py on the starter model with the CPU build: the options that
benchmarks/backends/cuda_error_sources.py varies (KV type, the prompt's batch path) do what they
say."""

import pytest

from engine.runtime import greedy_check
from engine.runtime.logit_trace import trace


@pytest.fixture(scope="module")
def model(starter_path) -> str:
    return starter_path


@pytest.fixture(scope="module")
def batch(model) -> dict:
    return trace(model, greedy_check.STORY, 4, flash_attn="on", n_ctx=256)


def test_the_prompt_one_token_at_a_time_gives_the_batch_s_logits_within_rounding(model, batch):
    by_token = trace(model, greedy_check.STORY, 4, flash_attn="on", n_ctx=256, prompt_by_token=True)
    assert by_token["prompt_by_token"] and not batch["prompt_by_token"]
    assert by_token["tokens"] == batch["tokens"]
    for a, b in zip(by_token["steps"], batch["steps"], strict=True):
        assert max(abs(x - y) for x, y in zip(a["top_logits"], b["top_logits"], strict=True)) < 0.2


def test_an_f32_kv_cache_is_allocated_at_twice_f16_s_size(model, batch):
    f32 = trace(model, greedy_check.STORY, 4, flash_attn="off", n_ctx=256, kv_type="f32")
    assert f32["kv_type"] == "f32"

    def kv_bytes(result: dict) -> int:
        return sum(a["bytes"] for a in result["allocations"] if a["kind"] == "KV")

    assert kv_bytes(batch) > 0
    # llama.cpp logs the sizes in MiB with two decimals
    assert kv_bytes(f32) == pytest.approx(2 * kv_bytes(batch), abs=0.02 * 2**20)
    assert f32["tokens"][:2] == batch["tokens"][:2]
