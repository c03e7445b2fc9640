"""API requests speculate too: `hearth serve --parallel 1 --speculative prompt-lookup` shares the
worker's decode loop, and a greedy completion is the text plain decoding gives."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.engine.server.conftest import API_KEY, REPO, START_TIMEOUT_S, Served, free_port

PROMPT = (
    "def add_numbers(first, second):\n    total = first + second\n    return total\n\n"
    "# The same function, with `total` renamed to `result`:\n"
)


@pytest.fixture(scope="module")
def speculating_server(starter_model, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("serve-spec") / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HEARTH_API_KEY": API_KEY}
    command = [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())",
               "serve", str(starter_model), "--port", str(port), "--parallel", "1", "--ctx", "512",
               "--threads", "1", "--speculative", "prompt-lookup"]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    server = Served(port=port, key=API_KEY, model=starter_model.name.removesuffix(".gguf"))
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if server.request("GET", "/", timeout=2)[0] == 200:
                    break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail(f"hearth serve did not start: {log.read_text()[-2000:]}")
        yield server, log
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
    server, log = speculating_server
    status, body = server.request("POST", "/v1/completions", {
        "model": server.model, "prompt": PROMPT, "max_tokens": 40, "temperature": 0,
    }, timeout=120)  # fmt: skip
    assert status == 200, body
    assert "[speculative decoding: prompt_lookup]" in log.read_text()
    assert body["choices"][0]["text"] == _plain_greedy(starter_model, PROMPT, 40)
