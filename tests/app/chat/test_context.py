"""Fitting a conversation into the context: table of cases for both policies."""

from __future__ import annotations

import pytest

from app.chat.context import ContextOverflow, estimate_prompt, fit_to_context
from engine.runtime import protocol as p


def _m(role: str, chars: int) -> p.ChatMessage:
    return p.ChatMessage(role=role, content="x" * chars)


CONVERSATION = [
    _m("system", 30),
    _m("user", 300),
    _m("assistant", 300),
    _m("user", 300),
    _m("assistant", 300),
    _m("user", 30),
]


def test_a_conversation_that_fits_is_sent_whole():
    fitted = fit_to_context(CONVERSATION, 4096, 512, drop_oldest=False)
    assert fitted.messages == CONVERSATION and fitted.dropped == 0


def test_stop_policy_says_what_happened_and_what_to_do():
    with pytest.raises(ContextOverflow, match="Start a new chat"):
        fit_to_context(CONVERSATION, 400, 100, drop_oldest=False)


@pytest.mark.parametrize(("n_ctx", "dropped"), [(500, 2), (300, 4)])
def test_drop_oldest_keeps_the_system_prompt_and_starts_on_a_user_turn(n_ctx, dropped):
    fitted = fit_to_context(CONVERSATION, n_ctx, 100, drop_oldest=True)
    assert fitted.dropped == dropped
    assert fitted.messages[0].role == "system"
    assert fitted.messages[1].role == "user"
    assert fitted.messages[-1] == CONVERSATION[-1]
    assert estimate_prompt(fitted.messages) <= n_ctx - 100


def test_a_newest_message_too_long_for_the_context_is_refused_even_when_dropping():
    with pytest.raises(ContextOverflow, match="newest message alone"):
        fit_to_context([_m("user", 3000)], 512, 100, drop_oldest=True)
