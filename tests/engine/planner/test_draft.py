"""Speculative decoding's memory in the plan: the draft model beside the main one, the checked
logits, budgets reduced by them; header checks of a draft's tokenizer; MTP layers in a header."""

from dataclasses import replace

import pytest

from engine.gguf import read_model_info
from engine.planner import DeviceBudget, PlanRequest
from engine.planner.draft import (
    SpeculativeMemory,
    checked_logits_bytes,
    draft_model_memory,
    mtp_layers,
    reserve,
    tokenizer_mismatch,
    with_checked_logits,
)
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf

GIB = 1024**3
REQUEST = PlanRequest(
    gpus=(DeviceBudget("cuda:0", "GPU", "cuda", 20 * GIB),), host_budget_bytes=32 * GIB
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("draft") / "tiny.gguf"
    return read_model_info(write_sparse_gguf(path, SHAPES["llama-tiny"], "Q8_0"))


def test_the_draft_goes_to_the_gpu_with_its_weights_and_kv(tiny):
    memory = draft_model_memory(tiny, REQUEST, n_ctx=4096, kv_type="f16", flash_attn=True,
                                on_gpu=True)  # fmt: skip
    on = dict(memory.per_device)
    assert on["cuda:0"] > memory.kv_bytes > 0
    # KV: 4 layers x 4096 cells x (K + V) x 2 KV heads x 64 x 2 bytes (f16) = 16 MiB
    assert memory.kv_bytes == 4 * 4096 * 2 * 2 * 64 * 2
    assert memory.weights_bytes > 0


def test_a_longer_context_costs_the_draft_more_kv(tiny):
    short, long = (
        draft_model_memory(tiny, REQUEST, n_ctx=n, kv_type="f16", flash_attn=True, on_gpu=True)
        for n in (2048, 8192)
    )
    assert long.kv_bytes == 4 * short.kv_bytes


def test_on_the_cpu_the_draft_is_in_system_ram(tiny):
    memory = draft_model_memory(tiny, REQUEST, n_ctx=2048, kv_type="q8_0", flash_attn=True,
                                on_gpu=False)  # fmt: skip
    # weights and KV in RAM; the GPU keeps only a compute buffer (llama.cpp offloads big ops)
    assert dict(memory.per_device)["host"] >= memory.weights_bytes + memory.kv_bytes


def test_checked_logits_are_a_float_row_per_extra_position():
    assert checked_logits_bytes(128256, 16) == 16 * 128256 * 4  # 7.8 MiB
    memory = with_checked_logits(None, 128256, 16, "cuda:0")
    assert memory.per_device == (("cuda:0", 16 * 128256 * 4),)


def test_reserving_lowers_each_budget_by_what_it_takes():
    memory = SpeculativeMemory(per_device=(("cuda:0", GIB), ("host", 2 * GIB)))
    reduced = reserve(REQUEST, memory)
    assert reduced.gpus[0].budget_bytes == 19 * GIB
    assert reduced.host_budget_bytes == 30 * GIB


def test_a_draft_larger_than_the_budget_leaves_nothing_not_less():
    memory = SpeculativeMemory(per_device=(("cuda:0", 40 * GIB),))
    assert reserve(REQUEST, memory).gpus[0].budget_bytes == 0


def test_tokenizers_are_compared_by_header(tiny):
    other = replace(tiny, tokenizer_model="llama")
    assert tokenizer_mismatch(tiny, tiny) is None
    assert "tokenizer" in tokenizer_mismatch(tiny, other)
    bigger = replace(tiny, vocab_size=(tiny.vocab_size or 0) + 1000)
    assert "vocabulary" in tokenizer_mismatch(tiny, bigger)


def test_mtp_layers_from_the_header(tiny):
    assert mtp_layers(tiny) == 0
    with_mtp = replace(tiny, metadata={**tiny.metadata, "llama.nextn_predict_layers": 1})
    assert mtp_layers(with_mtp) == 1


def test_mtp_sets_aside_a_batch_of_output_rows_and_its_layers_kv(tiny):
    from engine.planner.draft import mtp_memory
    from engine.planner.kv_cache import row_bytes
    from engine.planner.profile_dims import build_profile

    with_mtp = replace(tiny, metadata={**tiny.metadata, "llama.nextn_predict_layers": 1})
    profile = build_profile(with_mtp)
    memory = mtp_memory(with_mtp, n_ctx=1000, kv_type="f16", n_batch=2048, max_draft=8,
                        device="cuda:0")  # fmt: skip
    # every row of a 2,048-token batch: logits (beyond plain decoding's one) and hidden state
    assert memory.logits_bytes == 2047 * profile.n_vocab * 4 + 2048 * profile.n_embd * 4
    # one NextN layer shaped like the last one, at the context padded to 256 cells
    layer = profile.kv_layers[-1]
    per_cell = row_bytes("f16", layer.k_width) + row_bytes("f16", layer.v_width)
    assert memory.kv_bytes == per_cell * 1024
    assert memory.per_device == (("cuda:0", memory.logits_bytes + memory.kv_bytes),)
    two = replace(tiny, metadata={**tiny.metadata, "llama.nextn_predict_layers": 2})
    assert mtp_memory(two, n_ctx=1000, kv_type="f16", n_batch=2048, max_draft=8,
                      device="cuda:0").kv_bytes == 2 * memory.kv_bytes  # fmt: skip
