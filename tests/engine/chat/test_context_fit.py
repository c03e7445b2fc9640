"""Fitting a conversation by exact counts: whole turns leave from the front, the system prompt
and the newest turn stay, the fewest turns leave."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.chat.context_fit import ContextOverflow, fit_conversation, turn_starts


@dataclass(frozen=True)
class M:
    role: str
    content: str


def count(messages) -> int:
    """A stand-in tokenizer: 4 tokens of template per message plus one per word."""
    return sum(4 + len(m.content.split()) for m in messages)


def chat(turns: int, words: int = 10, system: bool = True) -> list[M]:
    messages = [M("system", "be brief")] if system else []
    for i in range(turns):
        messages += [M("user", f"q{i} " + "w " * words), M("assistant", f"a{i} " + "w " * words)]
    messages.append(M("user", "last question"))
    return messages


def test_a_conversation_that_fits_is_sent_whole():
    messages = chat(3)
    fitted = fit_conversation(messages, count, 1000, drop_oldest=True)
    assert fitted.messages == messages and fitted.dropped == 0
    assert fitted.n_tokens == count(messages)


def test_the_oldest_whole_turns_go_first_and_no_more_than_needed():
    messages = chat(20)
    budget = count(messages) - 20  # one 2-message turn (2 x 15 tokens) must go
    fitted = fit_conversation(messages, count, budget, drop_oldest=True)
    assert fitted.dropped == 2
    assert fitted.messages[0] == M("system", "be brief")
    assert fitted.messages[1].content.startswith("q1 ")  # the first turn left, whole
    assert fitted.messages[-1] == messages[-1]
    assert fitted.n_tokens <= budget


def test_without_dropping_an_overflow_says_so():
    with pytest.raises(ContextOverflow, match="Start a new chat"):
        fit_conversation(chat(20), count, 100, drop_oldest=False)


def test_a_newest_message_too_long_alone_is_refused():
    messages = [M("system", "s"), M("user", "w " * 500)]
    with pytest.raises(ContextOverflow, match="newest message alone"):
        fit_conversation(messages, count, 100, drop_oldest=True)


def test_turns_start_at_user_messages():
    messages = [M("system", "s"), M("assistant", "hello"), M("user", "a"), M("assistant", "b")]
    assert turn_starts(messages) == [1, 2]


@given(
    turns=st.integers(min_value=0, max_value=30),
    words=st.integers(min_value=0, max_value=40),
    budget=st.integers(min_value=10, max_value=2000),
    system=st.booleans(),
)
def test_fitting_keeps_a_suffix_of_whole_turns_that_fits(turns, words, budget, system):
    messages = chat(turns, words, system)
    try:
        fitted = fit_conversation(messages, count, budget, drop_oldest=True)
    except ContextOverflow:
        newest = ([messages[0]] if system else []) + messages[-1:]
        assert count(newest) > budget
        return
    kept = fitted.messages
    assert fitted.n_tokens == count(kept) <= budget
    body = kept[1:] if system else kept
    assert body == messages[len(messages) - len(body) :]  # a suffix: oldest first out
    assert body[0].role == "user"
    # one more turn would not have fitted
    if fitted.dropped:
        starts = turn_starts(messages)
        first_kept = len(messages) - len(body)
        previous = max(s for s in starts if s < first_kept)
        more = ([messages[0]] if system else []) + messages[previous:]
        assert count(more) > budget
