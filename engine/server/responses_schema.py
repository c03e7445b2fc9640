"""The request body of OpenAI's Responses API (/v1/responses), as a pydantic model. Input items
and tools stay plain dicts here and are read one by one in responses_routes, so that each
unusable one gets a message naming it.

Unknown fields are ignored (`reasoning`, `truncation`, `include`, `user`, ...).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.server.openai_schema import SamplingExtras


class ResponsesRequest(SamplingExtras):
    model: str = Field("", max_length=256)
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = Field(None, max_length=256)
    max_output_tokens: int | None = None
    stream: bool = False
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    text: dict[str, Any] | None = None  # {"format": {"type": "text" | "json_schema" | ...}}
    metadata: dict[str, str] | None = None
    store: bool = True  # False: not kept for previous_response_id or GET
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None  # llama.cpp's servers take it; OpenAI's has none
