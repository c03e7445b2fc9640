"""The engine's vocabulary, written once: which engine, KV cache types, engine states, why a reply
stopped.

StrEnum members are the strings they always were, so they travel over the worker protocol (JSON),
sit in settings files and compare with plain strings unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class Engine(StrEnum):
    """Which engine runs a model: the value travels in ModelParams, ModelLoaded, settings and
    plans; `display_name` is what a person reads."""

    LLAMA = "llama"
    HEARTH = "hearth"

    @property
    def display_name(self) -> str:
        return _ENGINE_DISPLAY_NAMES[self]


_ENGINE_DISPLAY_NAMES = {Engine.LLAMA: "llama.cpp", Engine.HEARTH: "Hearth engine"}


class KVType(StrEnum):
    """llama.cpp KV cache element types Hearth plans for (ggml type names)."""

    F16 = "f16"
    Q8_0 = "q8_0"
    Q4_0 = "q4_0"


# Best first: the order the planner prefers them in when memory allows.
KV_TYPES: tuple[str, ...] = tuple(KVType)


class EngineState(StrEnum):
    """Where the engine is. The worker reports NO_MODEL..GENERATING; the GUI adds the states of
    the worker process itself (STARTING, CRASHED, STOPPED: no worker running)."""

    STARTING = "starting"
    NO_MODEL = "no_model"
    LOADING = "loading"
    IDLE = "idle"
    GENERATING = "generating"
    CRASHED = "crashed"
    STOPPED = "stopped"


class Overflow(StrEnum):
    """What to do when a conversation no longer fits the context with room for the reply."""

    STOP = "stop"  # fail, and say so
    DROP_OLDEST = "drop_oldest"  # leave out the oldest whole turns (the worker counts exactly)


class StopReason(StrEnum):
    """Why a reply ended."""

    EOS = "eos"  # the model's end-of-generation token
    STOP_STRING = "stop_string"
    MAX_TOKENS = "max_tokens"
    STOPPED = "stopped"  # the person (or a client) asked
    CONTEXT_FULL = "context_full"


class WorkLimit(StrEnum):
    """Which bound on the engine's work a request went over (GenerationFailed.over_limit); the
    server answers each with its own status."""

    NONE = ""
    PROMPT = "prompt"  # its prompt would take too long to tokenize (413)
    GRAMMAR = "grammar"  # its output grammar took too long to check for one token (422)
    BUSY = "busy"  # earlier over-long work still runs; try again shortly (503)
