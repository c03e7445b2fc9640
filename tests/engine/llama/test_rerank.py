"""A reranker's input and score in llama.cpp, on the tiny reranker written here (its score is
computed again in numpy: testkit/tiny_reranker.py)."""

import pytest

from engine.llama import driver as llama
from engine.llama.params import ContextSettings, ModelSettings
from testkit.tiny_reranker import write_tiny_reranker

PAIRS = [("the cat", "the cat sat on the mat"), ("the cat", "paris is big")]


@pytest.mark.parametrize("template", ["", "{document} [SEP] [CLS] {query}"])
def test_a_pair_is_built_and_scored_as_the_model_says(tmp_path, template):
    tiny = write_tiny_reranker(tmp_path / "r.gguf", rerank_template=template)
    model = llama.Model(ModelSettings(path=str(tiny.path), n_gpu_layers=0))
    ctx = None
    try:
        assert model.is_reranker()
        ctx = llama.Context(model, ContextSettings(n_ctx=64, n_batch=64, n_threads=1))
        for query, document in PAIRS:
            tokens = model.rerank_tokens(query, document)
            assert tokens == tiny.tokens(query, document)
            (score,) = ctx.embed(tokens)  # one score: n_cls_out, not n_embd, values
            assert score == pytest.approx(tiny.score(query, document), abs=5e-3)
    finally:
        if ctx is not None:
            ctx.close()
        model.close()
