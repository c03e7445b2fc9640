"""The seam between the worker and its engines: what a model, its context and a sampler offer.

The decode loop (generation.py), the worker (engine_state.py) and the server talk to an engine
only through these Protocols and the engine's declared `Capabilities`; nothing outside an engine
asks `hasattr` or `isinstance` of it. Two engines implement the seam:

    engine/runtime/llama_engine.py    LlamaModel / LlamaContext / LlamaSampler (llama.cpp)
    engine/runtime/hearth_driver.py   HearthModel / HearthContext / HearthSampler (engine/hearth)

Both tokenize with llama.cpp's vocabulary (the Hearth engine loads it vocabulary-only), so both
engines see the same tokens and the same chat template.

    ctx = model.new_context(params)
    out = ctx.decode(prompt)            # the prompt's last token's output
    outs = ctx.check([token, *drafts], position)   # speculative: one output per checked row
    sampler = ctx.new_sampler(sampling)
    while ...:
        token = sampler.sample(out)
        out = ctx.step(token)

A capability an engine does not declare is refused with one line saying why and what to do
(`refusal`), before any work starts. Every engine reports a failure the person can act on as
`EngineError` (llama.cpp's boundary defines it; the seam passes it on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from engine.enums import Engine
from engine.llama.driver import EngineError

if TYPE_CHECKING:
    from engine.llama.driver import ContextInfo
    from engine.runtime.protocol import ModelParams, SamplingParams


@dataclass(frozen=True)
class Capabilities:
    """What an engine (and the model it loaded) can do beyond one sequence of plain decoding."""

    chat: bool = True  # write replies (a reranker only scores)
    rerank: bool = False  # score (query, document) pairs: a reranker model
    embeddings: bool = False  # /v1/embeddings, Embed
    batching: bool = False  # several sequences in one decode step (n_parallel > 1)
    speculative: bool = False  # drafts checked several tokens a step
    grammar: bool = False  # sampling constrained by a grammar or JSON schema
    vision: bool = False  # images through a multimodal projector


# What each capability is called in a refusal ("Embeddings run on ...").
_CAPABILITY_WORDS = {
    "embeddings": "Embeddings run",
    "batching": "Several requests decoded together run",
    "speculative": "Speculative decoding runs",
    "grammar": "Structured output (a JSON schema or grammar) runs",
    "vision": "Images run",
}


def refusal(engine: Engine, capabilities: Capabilities, capability: str) -> str | None:
    """Why `capability` cannot run on this engine, in one line with what to do ("" never:
    None when it can)."""
    if getattr(capabilities, capability):
        return None
    words = _CAPABILITY_WORDS[capability]
    return (
        f"{words} on the llama.cpp engine only, and this model is loaded on the "
        f"{engine.display_name}. Load it with the llama.cpp engine (Model page › Engine, or "
        "--engine llama) to use it."
    )


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What a decode produced for the token it ends with, where the engine keeps it.

    llama.cpp keeps the logits in its context: `row` is the batch row to sample (-1: the last).
    The Hearth engine hands back its logits tensor, and the greedy token when its decode graph
    already computed it (decode_graph.py's launch-ahead)."""

    row: int = -1
    logits: Any = None
    greedy: int | None = None


LAST_ROW = StepOutput()

NO_PROJECTOR = (
    "This model was loaded without a vision projector, so it cannot see images. Vision models "
    "come with an mmproj GGUF: download it from the model's Hub repository (or put it in the "
    "model's folder) and load the model again; or send the message without the image."
)


def vision_refusal(capabilities: Capabilities) -> str | None:
    """Why images cannot go to this model, in one line with what to do (None: they can)."""
    return None if capabilities.vision else NO_PROJECTOR


__all__ = [
    "LAST_ROW",
    "NO_PROJECTOR",
    "Capabilities",
    "Context",
    "EngineError",
    "MediaPrompt",
    "Model",
    "Sampler",
    "StepOutput",
    "Vocabulary",
    "refusal",
    "vision_refusal",
]


class Vocabulary(Protocol):
    """llama.cpp's vocabulary and metadata of the loaded file."""

    n_vocab: int

    def meta(self, key: str) -> str | None: ...
    def chat_template(self) -> str | None: ...
    def tokenize(
        self, text: str, *, add_special: bool, parse_special: bool = True
    ) -> list[int]: ...
    def token_bytes(self, token: int, *, special: bool = False) -> bytes: ...
    def token_text(self, token: int) -> str: ...
    def is_end_of_generation(self, token: int) -> bool: ...
    def adds_bos(self) -> bool: ...
    def bos_text(self) -> str: ...
    def eos_text(self) -> str: ...
    def special_tokens(self) -> tuple[int, ...]: ...
    def special_token_texts(self) -> tuple[str, ...]: ...


class Sampler(Protocol):
    """Picks the next token from a step's output (sampling settings fixed at creation)."""

    plain_greedy: bool  # the argmax and nothing else: a decode may pick it ahead
    in_graph: bool  # it draws in the engine's graph: only the token comes back, no logits

    def sample(self, out: StepOutput) -> int: ...
    def reset(self) -> None: ...
    def close(self) -> None: ...


class Context(Protocol):
    """A KV cache on a model and the position where the next token goes."""

    info: ContextInfo

    def decode(self, tokens: list[int]) -> StepOutput: ...
    def step(self, token: int) -> StepOutput: ...
    # speculative decoding (Capabilities.speculative): tokens at positions position.. (what
    # is cached ends there) in one step, the output of each row checked (a prefix of them
    # where the engine checks fewer); rows not kept are dropped by forget_from
    def check(self, tokens: list[int], position: int) -> list[StepOutput]: ...
    # before a reply's first check: what checks of up to n_tokens tokens need made now (the
    # Hearth engine captures its check graphs), not inside a timed reply
    def prepare_checks(self, n_tokens: int) -> None: ...
    def new_sampler(self, sampling: SamplingParams) -> Sampler: ...
    def clear(self) -> None: ...
    def forget_from(self, position: int) -> bool: ...
    def first_cached_position(self) -> int: ...
    def warm_up(self) -> None: ...
    def synchronize(self) -> None: ...
    def state_bytes(self) -> int: ...
    def close(self) -> None: ...


class MediaPrompt(Protocol):
    """A prompt holding images (an engine with `Capabilities.vision` makes it): its tokens,
    with a stand-in id (negative) for each position an image takes, so the decode loop can
    keep the cached prefix of the next turn as it does for text; and how to decode it."""

    tokens: list[int]

    def resume_point(self, n_cached: int) -> int: ...  # where decoding may start, <= n_cached
    def decode_from(self, ctx: Context, start: int) -> StepOutput: ...
    def close(self) -> None: ...


class Model(Vocabulary, Protocol):
    """Loaded weights on one engine."""

    engine: Engine
    capabilities: Capabilities
    params: ModelParams
    media_marker: str  # where an image goes in a prompt's text (vision only)

    def description(self) -> str: ...
    def n_ctx_train(self) -> int: ...
    def n_layers(self) -> int: ...
    def n_swa(self) -> int: ...
    def is_recurrent(self) -> bool: ...  # a state without positions: drafts cannot be dropped
    def n_params(self) -> int: ...
    def size_bytes(self) -> int: ...
    def new_context(self, params: ModelParams) -> Context: ...
    def media_prompt(self, text: str, images: list[bytes]) -> MediaPrompt: ...
    def close(self) -> None: ...
