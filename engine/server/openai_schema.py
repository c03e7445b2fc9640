"""Request bodies of the OpenAI routes, as pydantic models: types and fixed bounds. Bounds that
depend on the server's settings (max_tokens, n) are checked in engine/server/request_params.py.

Unknown fields are ignored, as OpenAI's own SDKs send fields a local server may not know.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Body):
    type: str
    text: str | None = None
    image_url: dict[str, Any] | str | None = None  # {"url": "data:image/png;base64,..."}


class FunctionCallIn(_Body):
    name: str = Field("", max_length=256)
    arguments: str | dict[str, Any] = "{}"  # OpenAI sends a JSON text; some clients an object


class ToolCallIn(_Body):
    id: str | None = Field(None, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCallIn


class ChatMessageIn(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = Field(None, max_length=256)
    tool_calls: list[ToolCallIn] | None = Field(None, max_length=128)
    tool_call_id: str | None = Field(None, max_length=256)


class StreamOptions(_Body):
    include_usage: bool = False


class SamplingExtras(_Body):
    """Sampling settings every generating route takes (llama.cpp's servers take them on all of
    theirs), beyond what each API's own schema has; read by request_params.sampling_of."""

    top_k: int | None = Field(None, ge=0, le=1000)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    repeat_penalty: float | None = Field(None, gt=0.0, le=10.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    seed: int | None = None


class _Sampling(SamplingExtras):
    model: str = Field("", max_length=256)
    max_tokens: int | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False  # llama.cpp's servers' extension: benchmarks of fixed lengths


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessageIn] = Field(min_length=1)
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


class CompletionRequest(_Sampling):
    prompt: str | list[str]
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None
    response_format: dict[str, Any] | None = None  # llama.cpp's servers take it here too


class EmbeddingRequest(_Body):
    model: str = Field("", max_length=256)
    input: str | list[str]
    encoding_format: Literal["float", "base64"] = "float"
