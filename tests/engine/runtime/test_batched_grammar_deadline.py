"""A grammar past its per-token deadline in batched decoding ends its own request, with the
bound named (the server answers 422), while the other sequences go on. In process, on the
starter model: the deadline is set already past for the grammar's request only."""

from dataclasses import replace

import pytest

from engine.runtime import batched_decode
from engine.runtime import protocol as p
from engine.runtime.batched_decode import BatchedDecoder
from engine.runtime.llama_engine import LlamaModel
from engine.runtime.to_llama import sampler_settings


@pytest.fixture(scope="module")
def decoder(starter_path):
    params = p.ModelParams(path=starter_path, n_ctx=512, n_parallel=2, n_threads=1)
    model = LlamaModel(params)
    ctx = model.new_context(params)
    events: list = []
    yield BatchedDecoder(model, ctx, 2, events.append), events
    ctx.close()
    model.close()


def test_a_grammar_past_its_deadline_fails_its_request_only(decoder, monkeypatch):
    decoder, events = decoder

    def settings(sampling):  # the grammar's request finds its deadline already past
        made = sampler_settings(sampling)
        return replace(made, grammar_seconds=-1.0) if made.grammar else made

    monkeypatch.setattr(batched_decode, "sampler_settings", settings)
    prompt = decoder.model.tokenize("The capital of France is", add_special=True)
    greedy = p.SamplingParams(temperature=0.0)
    yes_or_no = p.SamplingParams(temperature=0.0, grammar='root ::= "yes" | "no"')
    decoder.submit(p.Generate(request_id=1, sampling=yes_or_no, max_tokens=4), 0.0, prompt)
    decoder.submit(p.Generate(request_id=2, sampling=greedy, max_tokens=4), 0.0, prompt)
    for _ in range(20):
        if not decoder.busy:
            break
        decoder.step()
    assert not decoder.busy
    failed = [e for e in events if isinstance(e, p.GenerationFailed)]
    done = [e for e in events if isinstance(e, p.GenerationDone)]
    assert [(e.request_id, e.over_limit) for e in failed] == [(1, "grammar")]
    assert "limit of -1 s" in failed[0].message
    assert [e.request_id for e in done] == [2] and done[0].stats.n_generated > 0
