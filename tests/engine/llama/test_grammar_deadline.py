"""The grammar is checked within a per-token deadline (finding 1): a grammar whose check
outlasts it ends the generation with a message, instead of holding the engine; within it the
reply follows the grammar, with the token the chain would draw anyway kept when it fits."""

import pytest

from engine.llama import driver as llama
from engine.llama.params import ContextSettings, ModelSettings, SamplerSettings
from engine.llama.sampler import GrammarTooSlow, Sampler

YES_OR_NO = 'root ::= "yes" | "no"'


@pytest.fixture(scope="module")
def starter(starter_model):
    model = llama.Model(ModelSettings(path=str(starter_model), n_gpu_layers=0))
    ctx = llama.Context(model, ContextSettings(n_ctx=256, n_batch=64, n_threads=1,
                                               backend_sampling=False))  # fmt: skip
    yield model, ctx
    ctx.close()
    model.close()


def _reply(model, ctx, sampler, prompt: str, n: int) -> str:
    ctx.clear()
    ctx.decode(model.tokenize(prompt, add_special=True))
    pieces = []
    for _ in range(n):
        token = sampler.sample(ctx)
        if model.is_end_of_generation(token):
            break
        pieces.append(model.token_bytes(token))
        ctx.decode_one(token)
    return b"".join(pieces).decode()


def test_the_reply_follows_the_grammar(starter):
    model, ctx = starter
    sampler = Sampler(model, SamplerSettings(temperature=0.0, grammar=YES_OR_NO))
    try:
        assert _reply(model, ctx, sampler, "Is the sky green? Answer:", 8) in ("yes", "no")
    finally:
        sampler.close()


def test_a_check_past_its_deadline_ends_the_generation_and_says_why(starter):
    model, ctx = starter
    # A deadline already past: the first token the chain draws (" The", not "yes"/"no") sends
    # the sampler to check the vocabulary against the grammar, which stops at once.
    settings = SamplerSettings(temperature=0.0, grammar=YES_OR_NO, grammar_seconds=-1.0)
    sampler = Sampler(model, settings)
    try:
        with pytest.raises(GrammarTooSlow, match="limit of -1 s"):
            _reply(model, ctx, sampler, "Tell me a story.", 4)
    finally:
        sampler.close()


def test_a_token_the_grammar_takes_needs_no_check_of_the_vocabulary(starter):
    model, ctx = starter
    # Greedy picks " Paris" here; a grammar that allows it is never checked against the rest.
    grammar = "root ::= [ A-Za-z]+"
    settings = SamplerSettings(temperature=0.0, grammar=grammar, grammar_seconds=-1.0)
    sampler = Sampler(model, settings)
    try:
        assert _reply(model, ctx, sampler, "The capital of France is", 1).strip()
    finally:
        sampler.close()
