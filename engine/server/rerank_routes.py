"""Reranking: POST /v1/rerank (also /rerank and /v1/reranking, as llama-server), in the shape
llama-server and others use.

    {"query": "...", "documents": ["...", ...], "top_n": 3}
    -> {"results": [{"index": 2, "relevance_score": 4.1}, ...], "usage": {...}}

It needs a reranker GGUF (a cross-encoder whose pooling type is "rank", with a classification
head): each document is paired with the query as llama-server pairs them ([BOS] query [EOS]
[SEP] document [EOS]) and the model's pooled output is the document's score, unnormalized as
llama-server returns it. Results come best first; `top_n` keeps that many, `return_documents`
adds each document's text. A model that is not a reranker gets 400 saying so.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from engine.server import request_params as rp
from engine.server.responding import pooled_outputs
from engine.server.server_state import state_of

router = APIRouter(tags=["Rerank"])


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = Field("", max_length=256)
    query: str = Field(min_length=1)
    documents: list[str]
    top_n: int | None = Field(None, ge=1)
    return_documents: bool = False


@router.post("/v1/rerank")
@router.post("/rerank", include_in_schema=False)  # llama-server's other names for it
@router.post("/v1/reranking", include_in_schema=False)
async def rerank(body: RerankRequest, request: Request) -> dict[str, Any]:
    state = state_of(request)
    state, _, model_id = await state.serving(request, body.model)
    documents = rp.pooled_inputs_of(body.documents, state.config.limits, "documents")
    job = state.start_job(request, "/v1/rerank", model_id, False)
    done = await pooled_outputs(state, request, job, documents, body.query)
    return {
        "model": model_id,
        "object": "list",
        "usage": {"prompt_tokens": done.n_tokens, "total_tokens": done.n_tokens},
        "results": ranked([v[0] for v in done.vectors], body.top_n, documents,
                          body.return_documents),
    }  # fmt: skip


def ranked(scores: list[float], top_n: int | None, documents, with_text: bool) -> list[dict]:
    """Best first (ties in input order), at most `top_n`."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:top_n]
    return [
        {"index": i, "relevance_score": scores[i],
         **({"document": {"text": documents[i]}} if with_text else {})}
        for i in order
    ]  # fmt: skip
