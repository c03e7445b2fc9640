"""The messages between the GUI (or CLI) and the engine worker process.

Commands go to the worker on its stdin; events come back on its stdout. Each message is a frame:
a 4-byte little-endian length, then that many bytes of ASCII JSON holding the message's fields and
its `type`. ASCII, because a path with bytes that are not UTF-8 holds lone surrogates (PEP 383),
which UTF-8 cannot encode but JSON's `\\udcff` escapes carry unchanged. JSON rather than pickle:
the worker parses files from strangers, and a worker that was subverted must not be able to run
code in the GUI by what it sends back.

Every message is a frozen dataclass registered by its class name; `encode` and `decode` are the
only (de)serialisers.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

MAX_FRAME_BYTES = 16 * 1024 * 1024
PLAIN_COMPLETION = "completion"  # Generate.chat_format: the messages' text as it is, no template
_HEADER = struct.Struct("<I")
_REGISTRY: dict[str, type] = {}


class ProtocolError(Exception):
    """A frame that is not a valid message: a bug, or a worker that went wrong."""


def message(cls):
    """Register a dataclass as a protocol message (frozen, keyword-only)."""
    cls = dataclass(frozen=True, kw_only=True)(cls)
    _REGISTRY[cls.__name__] = cls
    return cls


# ---- settings carried by commands -------------------------------------------------------------


@message
class SamplingParams:
    """llama.cpp's sampler chain, in its order: penalties, top-k, top-p, min-p, temperature.

    temperature <= 0 means greedy decoding (argmax), which is deterministic.
    """

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    seed: int = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: a random seed per generation
    presence_penalty: float = 0.0  # OpenAI's: subtracted once from every token already seen
    frequency_penalty: float = 0.0  # OpenAI's: subtracted per occurrence
    # A GBNF grammar the output must follow (llama.cpp's grammar sampler, first in the chain);
    # empty: free text. Structured output and forced tool calls use it.
    grammar: str = ""


@message
class SpeculativeParams:
    """Speculative decoding (docs/speculative.md): a drafter proposes tokens, the model checks
    them all in one step and keeps those it would have produced itself."""

    # "off", "prompt_lookup" (n-gram match over prompt and reply), "draft_model" (a second,
    # small GGUF with the same vocabulary), "mtp" (the model's own MTP layers) or "auto"
    # (prompt lookup where the engine's own trial on this model says it pays, else off:
    # engine/runtime/speculative/trial.py).
    method: str = "off"
    draft_path: str = ""  # the draft model's GGUF, for "draft_model"
    max_draft: int = 16  # the most tokens drafted in one step; the length adapts below it


@message
class ModelParams:
    """How to load a model. 0 / "auto" values mean: let llama.cpp or the planner decide."""

    path: str
    n_ctx: int = 4096
    n_gpu_layers: int = -1  # -1: all layers that exist
    flash_attn: str = "auto"  # "on", "off", "auto"
    type_k: str = "f16"
    type_v: str = "f16"
    n_batch: int = 2048
    n_ubatch: int = 512
    n_threads: int = 0  # 0: a prompt on the physical cores, a decode on all but one
    use_mmap: bool = True
    # What the planner decides beyond the basics (engine/planner/settings.py):
    tensor_split: tuple[float, ...] = ()  # share of the layers per GPU; empty: llama.cpp's split
    cpu_tensors: tuple[str, ...] = ()  # regexes of tensors kept in RAM (MoE experts)
    swa_full: bool = True  # False: sliding-window layers keep only window + ubatch tokens
    # Sample inside the model's graph on the GPU (llama.cpp's experimental backend sampling),
    # so only the chosen token is copied back each step instead of every logit.
    backend_sampling: bool = True
    # Sequences decoded together in one context (the API server's concurrent requests). Above
    # 1 the KV cache is one pool of n_ctx cells shared by all of them (llama.cpp's unified KV),
    # and generation goes through engine/runtime/batched_decode.py.
    n_parallel: int = 1
    # "llama" (llama.cpp) or "hearth" (engine/hearth: Hearth's own forward pass; llama.cpp runs
    # the model instead, saying why, where that engine cannot).
    engine: str = "llama"
    # The Hearth engine's MoE experts in host memory (engine/hearth/expert_offload.py): the last
    # N layers keep their routed experts in RAM, each with a device cache of this many experts;
    # or (cpu picks k, a token's n_expert_used; no cache) the CPU computes every pick of those
    # layers (0: the GPU reads them; nothing between).
    hearth_ram_expert_layers: int = 0
    hearth_expert_cache_slots: int = 0
    hearth_expert_cpu_picks: int = 0
    speculative: SpeculativeParams = field(default_factory=SpeculativeParams)
    # Helper machines (`hearth host`, "host:port") whose devices the plan uses, in the order of
    # their shares at the front of tensor_split (engine/planner/remote.py).
    rpc_servers: tuple[str, ...] = ()
    # A vision projector (mmproj GGUF) loaded beside the model: images in messages then go
    # through llama.cpp's multimodal library (engine/llama/vision.py). "": text only.
    mmproj_path: str = ""


@message
class ChatMessage:
    role: str  # "system", "user", "assistant", "tool"
    content: str
    # For templates that know tool calls: the calls an assistant made (a JSON list, OpenAI's
    # shape), and for a "tool" message the call it answers.
    tool_calls_json: str = ""
    tool_call_id: str = ""
    name: str = ""
    # Images shown with the message (base64 of PNG/JPEG/GIF/BMP files, checked by
    # engine/chat/images.py); the model reads them before the text. Only a model loaded with
    # a vision projector takes them.
    images: tuple[str, ...] = ()


# ---- commands: GUI -> worker -------------------------------------------------------------------


@message
class Load:
    params: ModelParams


@message
class Generate:
    """Generate a reply. Give `messages` (rendered with the model's chat template), a raw
    `prompt` (used as it is, for base models), or `prompt_tokens` (benchmarks: exact lengths)."""

    request_id: int
    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    prompt_tokens: tuple[int, ...] = ()
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False  # benchmarks: always generate max_tokens tokens
    top_logprobs: int = -1  # -1: no log-probabilities; n >= 0: the chosen token's and n more
    tools_json: str = ""  # the tools offered (a JSON list), passed to the chat template
    # `messages` that do not fit the context with `reply_room` tokens left for the reply
    # (0: max_tokens, but at most a quarter of the context): an engine.enums.Overflow.
    overflow: str = "stop"
    reply_room: int = 0
    # How to turn `messages` into a prompt: "" the model's own template (else a built-in),
    # a llama.cpp built-in format's name ("chatml", "gemma", ...), or PLAIN_COMPLETION.
    chat_format: str = ""
    # False: decode without speculation even when the model was loaded with it (benchmarks
    # compare both on one load).
    speculate: bool = True
    # True: the last of `messages` is a reply cut short (an assistant message): the prompt ends
    # inside it, so the model goes on with it rather than starting a new one.
    continue_last: bool = False


@message
class Embed:
    """Pooled embeddings of each input (the API's /v1/embeddings). With a query, each input is
    a document that a reranker scores against it, and each vector holds its score(s)
    (/v1/rerank)."""

    request_id: int
    inputs: tuple[str, ...]
    query: str = ""


@message
class Stop:
    """Stop a generation; honoured before its next token is decoded. No request id: stop
    every generation in progress (the single-sequence engine only ever has one)."""

    request_id: int | None = None


@message
class Unload:
    pass


@message
class GetStatus:
    pass


@message
class GetMemoryReport:
    pass


@message
class Shutdown:
    pass


# ---- events: worker -> GUI ---------------------------------------------------------------------


@message
class Ready:
    pid: int
    llama_system_info: str
    gpu_offload_supported: bool


@message
class ModelLoaded:
    path: str
    description: str
    n_ctx: int
    n_ctx_train: int
    n_params: int
    size_bytes: int
    n_layers: int
    n_gpu_layers: int
    flash_attn: str  # "on" or "off" as llama.cpp settled it ("auto" only if it did not say)
    chat_template: str  # the format conversations are written in, for display
    load_seconds: float
    # Set when the model's own chat template was refused (unsafe, too slow, too large, broken)
    # and a built-in format is used instead: what happened and what to do, for the person.
    chat_template_problem: str = ""
    n_vocab: int = 0
    allocations: tuple[BufferAllocation, ...] = ()
    device_used_delta: tuple[DeviceDelta, ...] = ()
    tensors_in_ram: tuple[str, ...] = ()  # placed in RAM by ModelParams.cpu_tensors
    # Where the weights and the KV cache are, e.g. ("CUDA0: NVIDIA GeForce RTX 4090", "CPU").
    runs_on: tuple[str, ...] = ()
    # True when the weights of the previous load were kept and only the context was made anew
    # (the same file and placement, other context settings).
    weights_kept: bool = False
    n_parallel: int = 1  # sequences decoded together; they share the n_ctx cells of the cache
    template_takes_tools: bool = False  # the model's chat template renders a `tools` list
    # False: the file has no chat template (a base model); chats then use a built-in format or
    # plain completion (Generate.chat_format).
    own_chat_template: bool = True
    builtin_formats: tuple[str, ...] = ()  # llama.cpp's built-in chat formats (no template only)
    suggested_format: str = ""  # the built-in that fits the model best, by name or architecture
    type_k: str = "f16"  # the KV cache's element types, as loaded
    type_v: str = "f16"
    engine: str = "llama"  # which engine runs it: an engine.enums.Engine
    engine_note: str = ""  # why llama.cpp runs a model that asked for the Hearth engine
    speculative: str = "off"  # the speculative decoding that runs (SpeculativeParams.method)
    speculative_note: str = ""  # why it does not run as asked, and what to do
    # Where the weights are read from, and how fast (the speed-of-light gauge's divisor):
    # GB/s, and "measured copy rate" or "published bandwidth"; 0.0: not known.
    bandwidth_gbps: float = 0.0
    bandwidth_source: str = ""
    # Device memory the load took (NVML's used memory, all GPUs), and the worker's resident
    # memory growth: what the after-load line sets beside the plan's prediction.
    process_rss_delta: int = 0
    vision: bool = False  # a vision projector is loaded: messages may carry images
    image_tokens: int = 0  # the context one image takes, at most (the projector's header)


@message
class BufferAllocation:
    """A buffer llama.cpp reported allocating while loading (from its log)."""

    device: str  # "CUDA0", "CPU", "CPU_Mapped", ...
    kind: str  # "model", "KV", "compute", "output"
    bytes: int


@message
class DeviceDelta:
    """Memory in use on a device after the load minus before it, as the driver reports it."""

    device: str
    used_bytes: int


@message
class LoadFailed:
    path: str
    message: str  # what happened and what to do next
    details: tuple[str, ...] = ()  # llama.cpp's own error lines during the load, escaped


@message
class ChatTemplateChanged:
    """The format conversations are written in changed since the last load or reply: the
    model's template refused this conversation and a built-in format stands in (or back)."""

    template: str


@message
class TokenLogprob:
    """A generated token with its log-probability, and the most likely alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@message
class TokenText:
    """Text produced by one or more tokens (already valid UTF-8, stop strings held back)."""

    request_id: int
    text: str
    n_tokens: int = 1
    logprobs: tuple[TokenLogprob, ...] = ()  # one per token, when the request asked for them


@message
class GenerationStats:
    n_prompt_tokens: int
    n_prompt_tokens_reused: int  # prompt tokens whose KV cache was kept from the last turn
    n_generated: int
    prefill_seconds: float
    time_to_first_token: float  # from the request arriving to the first text leaving the worker
    decode_seconds: float
    # Speculative decoding: the method, tokens proposed and kept, and the time of one plain
    # decode step measured in the same reply (the speed-up's baseline; 0: too few measured).
    speculative: str = ""
    n_drafted: int = 0
    n_draft_accepted: int = 0
    plain_step_seconds: float = 0.0
    # why this reply's greedy text may differ from plain decoding's ("" where the engine
    # guarantees the same tokens: docs/speculative.md, "Greedy identity")
    speculative_caveat: str = ""
    # why speculation is on or off for this reply where the engine chose ("auto": its trial)
    speculative_why: str = ""
    # The speed of light for this reply: tokens per second if every byte a step reads moved at
    # the device's bandwidth (engine/hardware/speed_of_light.py); 0: not known here.
    bound_tokens_per_second: float = 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.n_draft_accepted / self.n_drafted if self.n_drafted else 0.0

    @property
    def speedup(self) -> float:
        """Decode time without speculation (plain steps at their measured cost) over the
        time taken; 0 when no plain step was measured."""
        steps = self.n_generated - 1
        if steps <= 0 or self.decode_seconds <= 0 or self.plain_step_seconds <= 0:
            return 0.0
        return steps * self.plain_step_seconds / self.decode_seconds

    @property
    def decode_tokens_per_second(self) -> float:
        # The first token comes out of the prefill; the rest are decode steps.
        steps = self.n_generated - 1
        return steps / self.decode_seconds if steps > 0 and self.decode_seconds > 0 else 0.0

    @property
    def prefill_tokens_per_second(self) -> float:
        computed = self.n_prompt_tokens - self.n_prompt_tokens_reused
        return computed / self.prefill_seconds if self.prefill_seconds > 0 else 0.0


@message
class GenerationDone:
    request_id: int
    stop_reason: str  # an engine.enums.StopReason
    stats: GenerationStats


@message
class PromptFitted:
    """The conversation did not fit: the worker left out the oldest `messages_dropped` messages
    (whole turns) so that the prompt of `n_prompt_tokens` and room for the reply fit."""

    request_id: int
    n_prompt_tokens: int
    messages_dropped: int


@message
class Embedded:
    request_id: int
    vectors: tuple[tuple[float, ...], ...]  # one per input, in order
    n_tokens: int  # the inputs' tokens, all together


@message
class GenerationFailed:
    request_id: int
    message: str
    context_full: bool = False  # the conversation does not fit and the policy is to stop
    over_limit: str = ""  # an engine.enums.WorkLimit: the bound on its work it went over


@message
class Unloaded:
    pass


@message
class Status:
    state: str  # an engine.enums.EngineState: idle, loading, generating, no_model
    model_path: str | None
    n_ctx: int
    n_tokens_cached: int
    n_active_sequences: int = 0  # generations decoding now
    n_waiting: int = 0  # generations waiting for room in the KV cache


@message
class MemoryReport:
    model_bytes: int
    context_bytes: int  # KV cache and other per-context state
    process_rss_bytes: int
    devices: tuple[DeviceMemory, ...] = ()


@message
class DeviceMemory:
    name: str
    description: str
    free_bytes: int
    total_bytes: int


@message
class CommandFailed:
    """A command that could not be carried out (for example Generate with no model loaded)."""

    command: str
    message: str


# ---- framing -----------------------------------------------------------------------------------


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        plain = {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        plain["type"] = type(value).__name__
        return plain
    if isinstance(value, list | tuple):
        return [_to_plain(v) for v in value]
    return value


def _from_plain(value: Any) -> Any:
    if isinstance(value, dict) and "type" in value:
        cls = _REGISTRY.get(value["type"])
        if cls is None:
            raise ProtocolError(f"unknown message type {value['type']!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: _from_plain(v) for k, v in value.items() if k in names}
        for f in dataclasses.fields(cls):
            if isinstance(kwargs.get(f.name), list):
                kwargs[f.name] = tuple(kwargs[f.name])
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise ProtocolError(f"bad fields for {value['type']}: {exc}") from exc
    if isinstance(value, list):
        return [_from_plain(v) for v in value]
    return value


def encode(msg: Any) -> bytes:
    body = json.dumps(_to_plain(msg), separators=(",", ":")).encode("ascii")
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes is over the {MAX_FRAME_BYTES} limit")
    return _HEADER.pack(len(body)) + body


def decode(body: bytes) -> Any:
    try:
        plain = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"frame is not JSON: {exc}") from exc
    msg = _from_plain(plain)
    if type(msg).__name__ not in _REGISTRY:
        raise ProtocolError("frame is not a message")
    return msg


def read_frame(stream: BinaryIO) -> Any | None:
    """Read one message; None at a clean end of stream."""
    header = _read_exactly(stream, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame length {length} is over the {MAX_FRAME_BYTES} limit")
    body = _read_exactly(stream, length)
    if body is None:
        raise ProtocolError("stream ended inside a frame")
    return decode(body)


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    chunks = []
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            if remaining == n:
                return None
            raise ProtocolError("stream ended inside a frame")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
