"""format_chat_prompt: the model's template first, then a built-in, saying which."""

from __future__ import annotations

import pytest

from engine.chat import (
    ChatTemplateError,
    check_model_template,
    format_chat_prompt,
    strip_leading_bos,
)
from tests.engine.chat.templates import GEMMA3, LLAMA3, TWO_TURNS

pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed: the built-in formats live in it"
)

CHATML_TEXT = (
    "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
    "<|im_start|>assistant\nHi.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def _format(source, messages=TWO_TURNS, **kwargs):
    kwargs.setdefault("architecture", "qwen2")
    return format_chat_prompt(source, messages, bos_token="<s>", eos_token="</s>", **kwargs)


def test_the_models_template_when_it_works():
    prompt, used = _format(LLAMA3)
    assert prompt.startswith("<s><|start_header_id|>system")
    assert used == "the model's chat template"


@pytest.mark.parametrize("source", [None, "", "   \n"])
def test_no_template_uses_the_builtin_for_the_architecture(source):
    prompt, used = _format(source, architecture="gemma3")
    assert prompt.startswith("<start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>")
    assert used == (
        "llama.cpp's built-in 'gemma' format, for the 'gemma3' architecture "
        "(the model has no chat template)"
    )


def test_no_template_and_a_telling_name():
    prompt, used = _format(None, architecture="llama", model_name="SmolLM2 360M Instruct")
    assert prompt == CHATML_TEXT
    assert "from the model's name" in used


def test_a_failing_template_falls_back_to_the_builtin_it_resembles():
    # a ChatML template (note <|im_start|>) with a bug: the fallback is ChatML, not the
    # architecture's guess
    broken = "{{ '<|im_start|>' }}{{ messages[0].content.nope.deeper }}"
    prompt, used = _format(broken, architecture="llama")
    assert prompt == CHATML_TEXT
    assert used.startswith("llama.cpp's built-in 'chatml' format, which the model's template")
    assert "UndefinedError" in used


def test_a_refusing_template_falls_back_too():
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    prompt, used = _format(GEMMA3, messages)
    assert prompt.startswith("<start_of_turn>user\na<end_of_turn>")
    assert "roles must alternate" in used


def test_a_hostile_template_falls_back_and_says_so(tmp_path):
    marker = tmp_path / "escaped"
    hostile = f"{{{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}}}"
    prompt, used = _format(hostile, architecture="phi3")
    assert prompt.startswith("<|system|>\nYou are terse.<|end|>")
    assert "'phi3' format, for the 'phi3' architecture" in used
    assert "unsafe operation" in used
    assert not marker.exists()


def test_a_runaway_template_falls_back_within_the_time_limit():
    spin = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    prompt, used = _format(spin, timeout_s=0.3)
    assert prompt == CHATML_TEXT
    assert "took longer than 0.3 s" in used


def test_when_the_builtin_fails_too_the_error_keeps_the_first_cause():
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    with pytest.raises(ChatTemplateError) as caught:
        _format("{{ ''.__class__ }}", messages)
    assert caught.value.kind == "unsafe"
    message = str(caught.value)
    assert "'__class__'" in message and "must be text" in message


def test_no_template_and_messages_the_builtin_cannot_take():
    with pytest.raises(ChatTemplateError) as caught:
        _format(None, [{"role": "user", "content": None}])
    assert caught.value.kind == "builtin"


def test_strip_leading_bos():
    assert strip_leading_bos("<s><s>text", "<s>") == "<s>text"  # one, never more
    assert strip_leading_bos("text<s>", "<s>") == "text<s>"
    assert strip_leading_bos("<s>text", "") == "<s>text"


@pytest.mark.parametrize(
    ("source", "kind", "advice"),
    [
        ("{{ ''.__class__ }}<|im_start|>", "unsafe", "consider deleting this model file"),
        ("{% for i in range(99999999) %}{{ i }}{% endfor %}<|im_start|>", "limit", "distrust"),
        ("{% for %}<|im_start|>", "syntax", "corrected file"),
    ],
)
def test_a_refused_template_is_found_at_load_with_its_advice(source, kind, advice):
    checked = check_model_template(source, architecture="qwen2", bos_token="<s>", eos_token="</s>")
    assert checked.refused is not None and checked.refused.kind == kind
    assert advice in str(checked.refused)
    assert checked.template.startswith("llama.cpp's built-in 'chatml' format")
    assert "<|im_start|>user\nHello<|im_end|>" in checked.text


def test_a_sound_template_is_not_refused_at_load():
    checked = check_model_template(LLAMA3, architecture="llama", bos_token="<s>", eos_token="")
    assert checked.refused is None and checked.template == "the model's chat template"


def test_a_template_that_ran_out_of_time_is_not_rendered_again():
    """It would otherwise cost every request the whole time limit before the built-in format
    stood in (2 s per request through the server)."""
    import time

    spin = "{% for i in range(99999) %}{% for j in range(99999) %}{{ '' }}{% endfor %}{% endfor %}"
    started = time.monotonic()
    first = _format(spin, timeout_s=0.3)
    took_first = time.monotonic() - started
    started = time.monotonic()
    again = _format(spin, timeout_s=0.3)
    assert took_first >= 0.3 and time.monotonic() - started < 0.2
    assert again == first and "took longer than 0.3 s" in again[1]
