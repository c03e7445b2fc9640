"""Continue: a reply cut short is the end of the prompt (the model goes on with it), not a
finished turn followed by a new one."""

from engine.runtime import protocol as p

from .conftest import GREEDY

ASKED = p.ChatMessage(role="user", content="Tell me a story.")
CUT_SHORT = p.ChatMessage(role="assistant", content="Once upon a")


def _prompt_tokens(engine, messages, **args) -> int:
    _, done = engine.run(messages=messages, sampling=GREEDY, max_tokens=1, **args)
    assert isinstance(done, p.GenerationDone), done
    return done.stats.n_prompt_tokens


def test_a_continued_reply_is_the_end_of_the_prompt(loaded_engine):
    opened = _prompt_tokens(loaded_engine, (ASKED,))
    continued = _prompt_tokens(loaded_engine, (ASKED, CUT_SHORT), continue_last=True)
    closed = _prompt_tokens(loaded_engine, (ASKED, CUT_SHORT))
    # the reply's few tokens after the opened turn; closed, it gets an end and a new turn too
    assert opened < continued <= opened + 4 < closed
