"""API requests speculate too: `hearth serve --parallel 1 --speculative prompt-lookup` shares the
worker's decode loop, and a greedy completion is the text plain decoding gives."""

from __future__ import annotations

import time

import pytest

from tests.engine.server.conftest import serving

PROMPT = (
    "def add_numbers(first, second):\n    total = first + second\n    return total\n\n"
    "# The same function, with `total` renamed to `result`:\n"
)


@pytest.fixture(scope="module")
def speculating_server(starter_model, tmp_path_factory):
    name = starter_model.name.removesuffix(".gguf")
    args = [str(starter_model), "--parallel", "1", "--ctx", "512", "--threads", "1",
            "--speculative", "prompt-lookup"]  # fmt: skip
    yield from serving(tmp_path_factory, name, args)


def _plain_greedy(model_path, prompt: str, max_tokens: int) -> str:
    """The same completion decoded without speculation, in this process."""
    from engine.runtime import protocol as p
    from engine.runtime.generation import Session, generate
    from engine.runtime.llama_engine import LlamaContext, LlamaModel
    from engine.runtime.to_llama import context_settings

    params = p.ModelParams(path=str(model_path), n_ctx=512, n_threads=1)
    model = LlamaModel(params)
    session = Session(model=model, ctx=LlamaContext(model, context_settings(params)))
    try:
        texts: list[str] = []
        generate(session, model.tokenize(prompt, add_special=True), p.SamplingParams(temperature=0),
                 max_tokens=max_tokens, stop_strings=(), emit=texts.append,
                 should_stop=lambda: False, started_at=time.perf_counter())  # fmt: skip
        return "".join(texts)
    finally:
        session.close()


def test_a_greedy_api_completion_speculates_and_keeps_the_text(speculating_server, starter_model):
    server = speculating_server
    status, body = server.request("POST", "/v1/completions", {
        "model": server.model, "prompt": PROMPT, "max_tokens": 40, "temperature": 0,
    }, timeout=120)  # fmt: skip
    assert status == 200, body
    assert "[speculative decoding: prompt_lookup]" in server.log.read_text()
    assert body["choices"][0]["text"] == _plain_greedy(starter_model, PROMPT, 40)
