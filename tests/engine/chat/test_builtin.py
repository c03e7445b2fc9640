"""llama.cpp's built-in chat formats, through the real library."""

from __future__ import annotations

import pytest

from engine.chat import (
    ChatTemplateError,
    apply_builtin_template,
    apply_matching_builtin,
    builtin_template_for,
    builtin_template_matching,
    builtin_template_names,
    render_chat_template,
    strip_leading_bos,
)
from engine.chat.builtin import _BY_ARCHITECTURE, _BY_NAME
from tests.engine.chat.templates import CHATML, GEMMA3, LLAMA3, TWO_TURNS

pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed: the built-in formats live in it"
)


def test_names_come_from_llama_cpp():
    names = builtin_template_names()
    assert {"chatml", "gemma", "llama3", "phi3", "mistral-v7"} <= set(names)
    assert len(names) == len(set(names)) > 30


def test_every_mapped_name_is_a_real_builtin():
    names = set(builtin_template_names())
    assert set(_BY_ARCHITECTURE.values()) <= names
    assert {name for _, name in _BY_NAME} <= names


def test_chatml_two_turns():
    assert apply_builtin_template("chatml", TWO_TURNS) == (
        "<|im_start|>system\nYou are terse.<|im_end|>\n"
        "<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\nHi.<|im_end|>\n"
        "<|im_start|>user\nName a colour.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_gemma_two_turns_without_generation_prompt():
    assert apply_builtin_template("gemma", TWO_TURNS, add_generation_prompt=False) == (
        "<start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n"
        "<start_of_turn>model\nHi.<end_of_turn>\n"
        "<start_of_turn>user\nName a colour.<end_of_turn>\n"
    )


@pytest.mark.parametrize(
    ("name", "source", "bos"),
    [("chatml", CHATML, ""), ("gemma", GEMMA3, "<bos>"), ("llama3", LLAMA3, "<|begin_of_text|>")],
)
def test_builtin_agrees_with_the_real_template(name, source, bos):
    """The fallback gives what the model's own template would have (BOS aside)."""
    rendered = render_chat_template(source, TWO_TURNS, bos_token=bos)
    assert strip_leading_bos(rendered, bos) == apply_builtin_template(name, TWO_TURNS)


def test_a_long_conversation_grows_the_buffer():
    messages = [{"role": "user", "content": ""}] * 2000  # output ~20x the content
    prompt = apply_builtin_template("chatml", messages)
    assert prompt.count("<|im_start|>user\n<|im_end|>\n") == 2000


def test_non_ascii_and_nul_characters():
    messages = [{"role": "user", "content": "héllo 🌍\x00 there"}]
    assert apply_builtin_template("chatml", messages) == (
        "<|im_start|>user\nhéllo 🌍 there<|im_end|>\n<|im_start|>assistant\n"
    )


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ChatTemplateError, match=r"no built-in chat format called 'nope'.*chatml"):
        apply_builtin_template("nope", TWO_TURNS)


def test_messages_must_be_text():
    with pytest.raises(ChatTemplateError, match="must be text"):
        apply_builtin_template("chatml", [{"role": "user", "content": [{"type": "text"}]}])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (CHATML, "chatml"),
        (GEMMA3, "gemma"),
        (LLAMA3, "llama3"),
        ("{{ '<|user|>' }}{{ '<|assistant|>' }}{{ '<|end|>' }}", "phi3"),
        ("{{ messages }}", None),
    ],
)
def test_builtin_recognised_in_a_template(source, expected):
    assert builtin_template_matching(source) == expected


def test_apply_matching_builtin_uses_llama_cpps_own_recognition():
    prompt, name = apply_matching_builtin(GEMMA3, TWO_TURNS)
    assert name == "gemma"
    assert prompt == apply_builtin_template("gemma", TWO_TURNS)
    assert apply_matching_builtin("{{ messages }}", TWO_TURNS) is None


@pytest.mark.parametrize(
    ("architecture", "model_name", "expected"),
    [
        ("gemma3", None, "gemma"),
        ("gemma2", "Gemma 2 2b It", "gemma"),
        ("qwen2", None, "chatml"),
        ("qwen3moe", None, "chatml"),
        ("phi3", None, "phi3"),
        ("llama", None, "llama3"),
        ("llama", "Smollm2 135M 8k Lc100K Mix1 Ep2", "chatml"),  # the starter model
        ("llama", "Meta Llama 3.1 8B Instruct", "llama3"),
        ("llama", "Llama 2 7b Chat Hf", "llama2-sys"),
        ("llama", "TinyLlama 1.1B Chat v1.0", "zephyr"),
        ("llama", "Mistral 7B Instruct v0.3", "mistral-v3"),
        ("command-r", None, "command-r"),
        ("something-new", None, "chatml"),
        (None, None, "chatml"),
    ],
)
def test_builtin_for_architecture_and_name(architecture, model_name, expected):
    assert builtin_template_for(architecture, model_name) == expected
