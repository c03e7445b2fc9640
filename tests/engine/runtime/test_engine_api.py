"""The engine seam: capabilities refuse with a reason, and both engines' classes offer what the
decode loop and the worker call (checked on the classes, so no model is loaded here)."""

from __future__ import annotations

import inspect

import pytest

from engine.enums import Engine
from engine.runtime.engine_api import Capabilities, Context, Model, Sampler, refusal
from engine.runtime.llama_engine import LlamaContext, LlamaModel, LlamaSampler


def _protocol_members(protocol) -> set[str]:
    members = set()
    for klass in protocol.__mro__:
        if klass is object or klass.__name__ in ("Protocol", "Generic"):
            continue
        members |= {name for name in vars(klass) if not name.startswith("_")}
        members |= set(getattr(klass, "__annotations__", {}))
    return members


@pytest.mark.parametrize(
    ("capability", "words"),
    [
        ("embeddings", "Embeddings run"),
        ("batching", "Several requests decoded together run"),
        ("speculative", "Speculative decoding runs"),
        ("grammar", "Structured output"),
        ("vision", "Images run"),
    ],
)
def test_a_capability_an_engine_lacks_is_refused_with_what_to_do(capability, words):
    message = refusal(Engine.HEARTH, Capabilities(), capability)
    assert message.startswith(words)
    assert "Hearth engine" in message and "llama.cpp engine" in message
    assert refusal(Engine.LLAMA, Capabilities(**{capability: True}), capability) is None


def _offers(klass, protocol) -> set[str]:
    """Members of `protocol` that `klass` (or its instances, set in __init__) lacks."""
    source = "".join(inspect.getsource(k) for k in klass.__mro__ if k.__module__ != "builtins")
    return {
        name
        for name in _protocol_members(protocol)
        if not hasattr(klass, name) and f"self.{name} =" not in source
    }


@pytest.mark.parametrize(
    ("klass", "protocol"),
    [(LlamaModel, Model), (LlamaContext, Context), (LlamaSampler, Sampler)],
)
def test_the_llama_engine_offers_the_whole_seam(klass, protocol):
    assert _offers(klass, protocol) == set()


def test_the_hearth_engine_offers_the_whole_seam():
    pytest.importorskip("torch")
    from engine.runtime.hearth_batch_context import HearthBatchContext
    from engine.runtime.hearth_driver import HearthContext, HearthModel, HearthSampler

    for klass, protocol in (
        (HearthModel, Model), (HearthContext, Context), (HearthBatchContext, Context)
    ):  # fmt: skip
        assert _offers(klass, protocol) == set(), klass
    assert _offers(HearthSampler, Sampler) == set()


def test_engine_names_are_spelled_once():
    assert [e.display_name for e in Engine] == ["llama.cpp", "Hearth engine"]
    assert LlamaModel.engine == Engine.LLAMA == "llama"
