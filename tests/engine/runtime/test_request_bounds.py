"""The worker's own bounds against hostile requests (findings 2 and 5): stops that arrive
before their request begins, the special-token flood refused before llama.cpp splits it, and
embeddings bounded in tokens and stopped between inputs."""

import time

import pytest

from engine.runtime.early_stops import KEPT, EarlyStops
from engine.runtime.embedding_run import EmbeddingStopped, embed_inputs
from engine.runtime.embedding_run import batches as batches_of
from engine.runtime.prompt_bounds import (
    MAX_SPECIAL_STRINGS,
    PromptTooCostly,
    check_prompt_text,
    check_special_strings,
    special_string_pattern,
)

SPECIAL = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def test_a_stop_before_the_start_is_kept_for_its_request_only():
    stops = EarlyStops()
    stops.note(7)
    stops.note(None)  # "stop everything" is for what runs now
    assert not stops.take(6)
    assert stops.take(7) and not stops.take(7)


def test_early_stops_are_bounded():
    stops = EarlyStops()
    for request_id in range(KEPT + 10):
        stops.note(request_id)
    assert not stops.take(0) and stops.take(KEPT + 9)


def test_a_flood_of_special_token_strings_is_refused_before_tokenizing():
    pattern = special_string_pattern(SPECIAL)
    flood = "<|im_start|>" * 80_000  # finding 2: 960 kB that held the worker 30 s
    started = time.perf_counter()
    with pytest.raises(PromptTooCostly, match=f"{MAX_SPECIAL_STRINGS:,}"):
        check_special_strings(flood, pattern)
    assert time.perf_counter() - started < 1.0


def test_a_conversation_with_its_template_markers_passes():
    pattern = special_string_pattern(SPECIAL)
    chat = "<|im_start|>user\nHi<|im_end|>\n" * 1000
    check_special_strings(chat, pattern)


class _Model:
    def __init__(self):
        self.asked = 0

    def special_token_texts(self):
        self.asked += 1
        return SPECIAL


def test_short_prompts_never_read_the_vocabulary():
    model = _Model()
    check_prompt_text(model, "<|im_start|>" * 10)
    assert model.asked == 0
    with pytest.raises(PromptTooCostly):
        check_prompt_text(model, "<|im_end|>" * (MAX_SPECIAL_STRINGS + 1))


def test_embeddings_over_the_token_budget_are_refused_before_any_is_computed():
    computed = []
    with pytest.raises(ValueError, match="16,384 tokens"):
        embed_inputs(lambda text: [1] * 2000, computed.append, ["x"] * 64, lambda: False)
    assert computed == []


def test_embeddings_stop_between_batches():
    computed = []
    answers = iter([False, False, True])
    with pytest.raises(EmbeddingStopped):
        embed_inputs(lambda text: [1], lambda ts: computed.append(ts) or [[0.0]] * len(ts),
                     ["a", "b", "c", "d", "e"], lambda: next(answers), batch_inputs=2)  # fmt: skip
    assert computed == [[[1], [1]], [[1], [1]]]  # two batches of two, then the stop


def test_embeddings_within_the_bounds_go_in_batches():
    batches = []

    def embed_batch(token_lists):
        batches.append(len(token_lists))
        return [[float(len(t))] for t in token_lists]

    vectors, n_tokens = embed_inputs(lambda text: [1] * len(text), embed_batch,
                                     ["ab", "c", "def", "g"], lambda: False, batch_tokens=4,
                                     batch_inputs=8)  # fmt: skip
    assert vectors == ((2.0,), (1.0,), (3.0,), (1.0,)) and n_tokens == 7
    assert batches == [2, 2]  # 2 + 1 tokens, then 3 + 1: at most 4 together


@pytest.mark.parametrize(
    ("lengths", "tokens", "inputs", "groups"),
    [
        ([], 10, 4, []),
        ([3, 3, 3], 10, 4, [[0, 1, 2]]),
        ([3, 3, 3, 3], 10, 4, [[0, 1, 2], [3]]),  # tokens bound
        ([1, 1, 1, 1, 1], 10, 2, [[0, 1], [2, 3], [4]]),  # inputs bound
        ([12, 1, 12], 10, 4, [[0], [1], [2]]),  # too long alone: its own (refused with its length)
        ([5, 5], 10, 4, [[0, 1]]),  # exactly the bound
    ],
)  # fmt: skip
def test_inputs_are_grouped_in_order_within_both_bounds(lengths, tokens, inputs, groups):
    assert [list(g) for g in batches_of(lengths, tokens, inputs)] == groups


def test_the_starter_models_special_tokens_are_read_from_its_vocabulary(starter_model):
    from engine.llama import driver as llama
    from engine.llama.params import ModelSettings

    model = llama.Model(ModelSettings(path=str(starter_model), vocab_only=True))
    try:
        assert "<|im_start|>" in model.special_token_texts()
        with pytest.raises(PromptTooCostly):
            check_prompt_text(model, "<|im_start|>" * 80_000)
        check_prompt_text(model, "<|im_start|>user\nHi<|im_end|>\n" * 500)
    finally:
        model.close()
