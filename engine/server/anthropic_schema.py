"""Request bodies of Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens), as
pydantic models. Content blocks stay plain dicts here and are read one by one in
anthropic_routes, so that each unusable block gets a message naming it.

Unknown fields are ignored (the SDKs send fields a local server may not know, such as
`metadata`, `thinking` or `service_tier`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.server.openai_schema import SamplingExtras


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MessageIn(_Body):
    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]]


class ToolIn(_Body):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    type: str | None = None  # a server tool (web_search_...) has one; custom tools need none


class ToolChoice(_Body):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None


class CountTokensRequest(_Body):
    model: str = Field("", max_length=256)
    messages: list[MessageIn] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[ToolIn] | None = None
    tool_choice: ToolChoice | None = None


class MessagesRequest(CountTokensRequest, SamplingExtras):
    max_tokens: int
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(None, ge=0.0, le=1.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
