"""Embeddings in batches (engine/llama/batch.py pooled_outputs): several inputs in one
llama_decode, each a sequence of its own, give what each gives alone."""

import pytest

from engine.llama import driver as llama
from engine.llama.batch import pooled_outputs
from engine.llama.params import ContextSettings, ModelSettings
from testkit.tiny_reranker import write_tiny_reranker

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France.", "hi", "1 2 3 4 5 6 7"]


def _cosine(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def test_a_batch_of_inputs_embeds_each_as_alone(starter_model):
    model = llama.Model(ModelSettings(path=str(starter_model), n_gpu_layers=0))
    ctx = None
    try:
        settings = ContextSettings(n_ctx=256, n_batch=256, n_threads=1, embeddings=True,
                                   n_parallel=len(TEXTS))  # fmt: skip
        ctx = llama.Context(model, settings)
        token_lists = [model.tokenize(t, add_special=True) for t in TEXTS]
        together = pooled_outputs(ctx, token_lists)
        alone = [ctx.embed(tokens) for tokens in token_lists]
        assert len(together) == len(TEXTS)
        for batched, single in zip(together, alone, strict=True):
            assert _cosine(batched, single) > 0.999  # the same up to float sums' order
        assert _cosine(together[0], together[1]) < 0.99  # and the inputs did not mix
        with pytest.raises(llama.EngineError, match="256"):
            pooled_outputs(ctx, [token_lists[0] * 40])
    finally:
        if ctx is not None:
            ctx.close()
        model.close()


def test_a_rerankers_scores_in_one_batch_match_the_hand_computed_ones(tmp_path):
    tiny = write_tiny_reranker(tmp_path / "r.gguf")
    model = llama.Model(ModelSettings(path=str(tiny.path), n_gpu_layers=0))
    ctx = None
    pairs = [("the cat", "the cat sat on the mat"), ("the cat", "paris is big"), ("a", "b")]
    try:
        ctx = llama.Context(model, ContextSettings(n_ctx=64, n_batch=64, n_threads=1,
                                                   n_parallel=len(pairs)))  # fmt: skip
        scores = pooled_outputs(ctx, [model.rerank_tokens(q, d) for q, d in pairs])
        for (query, document), (score,) in zip(pairs, scores, strict=True):
            assert score == pytest.approx(tiny.score(query, document), abs=5e-3)
    finally:
        if ctx is not None:
            ctx.close()
        model.close()
