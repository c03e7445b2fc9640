"""The worker's own bounds against hostile requests (findings 2 and 5): stops that arrive
before their request begins, the special-token flood refused before llama.cpp splits it,
tokenizing bounded in time on a thread that is abandoned past it, and embeddings bounded in
tokens and stopped between inputs."""

import threading
import time

import pytest

from engine.runtime.early_stops import KEPT, EarlyStops
from engine.runtime.embedding_run import EmbeddingStopped, embed_inputs
from engine.runtime.embedding_run import batches as batches_of
from engine.runtime.prompt_bounds import (
    MAX_SPECIAL_STRINGS,
    BoundedTokenizer,
    PromptTooCostly,
    TokenizeBudget,
    TokenizerBusy,
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


class _SlowVocabulary:
    """A vocabulary whose long texts tokenize only once the test lets them (no clock in play)."""

    def __init__(self):
        self.release = threading.Event()
        self.threads: list[str] = []

    def special_token_texts(self):
        return SPECIAL

    def tokenize(self, text, *, add_special, parse_special=True):
        self.threads.append(threading.current_thread().name)
        if text == "boom" * 5:
            raise ValueError("bad text")
        if len(text) > 8:
            self.release.wait(10)
        return [len(text)]


def test_short_texts_are_tokenized_where_they_are_asked_for():
    vocabulary = _SlowVocabulary()
    tokenizer = BoundedTokenizer(vocabulary, inline_chars=8)
    assert tokenizer.tokenize("short", TokenizeBudget(0.0), add_special=True) == [5]
    assert vocabulary.threads == [threading.current_thread().name]


def test_a_long_text_within_its_time_comes_back_from_its_thread():
    vocabulary = _SlowVocabulary()
    vocabulary.release.set()
    tokenizer = BoundedTokenizer(vocabulary, inline_chars=8)
    budget = TokenizeBudget(10.0)
    assert tokenizer.tokenize("x" * 100, budget, add_special=True) == [100]
    assert vocabulary.threads == ["tokenize"]
    assert 0.0 < budget.spent < 10.0  # the time it took counts against the request's
    with pytest.raises(ValueError, match="bad text"):  # its failure is the caller's
        tokenizer.tokenize("boom" * 5, TokenizeBudget(10.0), add_special=True)


def test_tokenizing_past_the_requests_time_is_abandoned_and_says_the_limit():
    vocabulary = _SlowVocabulary()
    tokenizer = BoundedTokenizer(vocabulary, inline_chars=8, max_abandoned=2)
    try:
        for _ in range(2):
            with pytest.raises(PromptTooCostly, match=r"100 characters\).*limit of 0.001 s"):
                tokenizer.tokenize("x" * 100, TokenizeBudget(0.001), add_special=True)
        # Two calls still run: a third long text is refused at once, a short one still served.
        with pytest.raises(TokenizerBusy, match="try again"):
            tokenizer.tokenize("x" * 100, TokenizeBudget(10.0), add_special=True)
        assert tokenizer.tokenize("short", TokenizeBudget(0.0), add_special=True) == [5]
    finally:
        vocabulary.release.set()
        tokenizer.close()  # waits for the abandoned calls: the vocabulary outlives them
    assert tokenizer.tokenize("x" * 100, TokenizeBudget(10.0), add_special=True) == [100]


def test_a_request_whose_time_is_spent_tokenizes_no_long_text():
    vocabulary = _SlowVocabulary()
    vocabulary.release.set()
    tokenizer = BoundedTokenizer(vocabulary, inline_chars=8)
    budget = TokenizeBudget(10.0)
    budget.spent = 10.0  # earlier renders of the same conversation took it all
    with pytest.raises(PromptTooCostly, match="limit of 10 s"):
        tokenizer.tokenize("x" * 100, budget, add_special=True)
    tokenizer.close()


def test_the_special_string_bound_comes_first():
    tokenizer = BoundedTokenizer(_SlowVocabulary())
    with pytest.raises(PromptTooCostly, match="special-token strings"):
        tokenizer.tokenize("<|im_end|>" * (MAX_SPECIAL_STRINGS + 1), TokenizeBudget(),
                           add_special=True)  # fmt: skip
    # Text taken as it is (parse_special=False) cannot hold special tokens: not counted.
    flood = "<|im_end|>" * (MAX_SPECIAL_STRINGS + 1)
    vocabulary = _SlowVocabulary()
    vocabulary.release.set()
    assert BoundedTokenizer(vocabulary).tokenize(
        flood, TokenizeBudget(), add_special=False, parse_special=False
    ) == [len(flood)]


def test_a_request_over_a_bound_fails_with_the_bound_named():
    from engine.chat.context_fit import ContextOverflow
    from engine.llama.sampler import GrammarTooSlow
    from engine.runtime.engine_state import failure

    table = [
        (PromptTooCostly("long"), "prompt", False),
        (GrammarTooSlow("slow"), "grammar", False),
        (TokenizerBusy("busy"), "busy", False),
        (ContextOverflow("full"), "", True),
        (ValueError("bad"), "", False),
    ]
    for exc, over_limit, context_full in table:
        event = failure(3, exc)
        assert (event.request_id, event.message) == (3, str(exc))
        assert (event.over_limit, event.context_full) == (over_limit, context_full)
