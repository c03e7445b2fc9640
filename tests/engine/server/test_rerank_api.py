"""Reranking on a running `hearth serve` with a tiny reranker GGUF written here (llama.cpp's
BERT with rank pooling, random weights), its scores checked against the same model computed
in numpy (testkit/tiny_reranker.py)."""

import pytest

from engine.server.rerank_routes import ranked
from testkit.tiny_reranker import write_tiny_reranker

from .conftest import serving

QUERY = "the cat"
DOCUMENTS = ["the cat sat on the mat", "a dog ran fast", "paris is big", "the dog sat"]


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    model = write_tiny_reranker(tmp_path_factory.mktemp("reranker") / "tiny-reranker.gguf")
    args = [str(model.path), "--parallel", "1", "--ctx", "64"]
    for server in serving(tmp_path_factory, "tiny-reranker", args):
        yield model, server


def test_documents_come_best_first_with_the_models_own_scores(reranker):
    model, server = reranker
    status, body = server.request(
        "POST", "/v1/rerank", {"model": "tiny-reranker", "query": QUERY, "documents": DOCUMENTS}
    )
    assert status == 200, body
    expected = {i: model.score(QUERY, d) for i, d in enumerate(DOCUMENTS)}
    got = {r["index"]: r["relevance_score"] for r in body["results"]}
    assert got == pytest.approx(expected, abs=5e-3)  # f16 in llama.cpp's attention
    best_first = sorted(expected, key=expected.get, reverse=True)
    assert [r["index"] for r in body["results"]] == best_first
    tokens = sum(len(model.tokens(QUERY, d)) for d in DOCUMENTS)
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


def test_top_n_and_the_documents_text(reranker):
    _, server = reranker
    status, body = server.request("POST", "/rerank", {
        "query": QUERY, "documents": DOCUMENTS, "top_n": 2, "return_documents": True})  # fmt: skip
    assert status == 200, body
    assert len(body["results"]) == 2
    assert all(r["document"]["text"] == DOCUMENTS[r["index"]] for r in body["results"])


def test_a_reranker_refuses_to_chat_or_embed_saying_why(reranker):
    _, server = reranker
    status, body = server.request(
        "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}
    )
    assert status == 400 and "/v1/rerank" in body["error"]["message"]
    status, body = server.request("POST", "/v1/embeddings", {"input": "the cat"})
    assert status == 400 and "reranker" in body["error"]["message"]


def test_a_chat_model_refuses_to_rerank_saying_why(served):
    status, body = served.request("POST", "/v1/rerank", {"query": "a", "documents": ["b"]})
    assert status == 400 and "not a reranker" in body["error"]["message"]


@pytest.mark.parametrize(
    ("scores", "top_n", "order"),
    [([0.1, 0.9, 0.5], None, [1, 2, 0]), ([0.1, 0.9, 0.5], 1, [1]), ([1.0, 2.0, 1.0], 5, [1, 0, 2]),
     ([-3.0], None, [0])],
)  # fmt: skip
def test_ranked_puts_the_best_first_and_ties_in_input_order(scores, top_n, order):
    results = ranked(scores, top_n, ["x"] * len(scores), with_text=False)
    assert [r["index"] for r in results] == order
    assert [r["relevance_score"] for r in results] == [scores[i] for i in order]
