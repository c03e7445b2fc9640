"""From a conversation to prompt text: the model's template, else a llama.cpp built-in.

The order, for `format_chat_prompt`:

1. the model's own chat template (`tokenizer.chat_template`), rendered in the sandbox;
2. if it fails: the llama.cpp built-in format recognised in that template's text (a broken
   Qwen template still says `<|im_start|>`, so ChatML is right for it);
3. if there is no template, or nothing is recognised: the built-in chosen from the model's
   name and architecture (`builtin_template_for`).

Only when the built-in fails too (messages that are not text) is ChatTemplateError raised. The
description returned with the prompt says which was used and why, for the GUI and the logs.

BOS convention. HF templates often write the BOS text themselves (`{{ bos_token }}...`), and
llama.cpp's tokenizer adds a BOS token itself when the vocabulary says so
(`llama_vocab_get_add_bos`). Tokenizing such a prompt with `add_special=True` would give two BOS
tokens, which degrades some models. So, as llama.cpp's `common_chat_templates_apply` does: when
the tokenizer adds BOS, remove one leading BOS text from the prompt (`strip_leading_bos`), then
tokenize with `add_special=True, parse_special=True`. When it does not, keep the prompt as the
template wrote it. The built-in formats never write a BOS; they rely on the tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.chat.builtin import (
    apply_builtin_template,
    apply_matching_builtin,
    builtin_choice,
)
from engine.chat.errors import ChatTemplateError
from engine.chat.template import DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_TIMEOUT_S, render_chat_template

MODEL_TEMPLATE = "the model's chat template"
# What a model's template is tried on when it loads: the plainest conversation there is, so a
# template refused here (unsafe, too slow, too large, broken) is refused for every chat.
SAMPLE_CONVERSATION = (
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Tell me a story."},
)


@dataclass(frozen=True)
class ChatPrompt:
    text: str
    template: str  # which format wrote it, and why: for the GUI, the CLI and the logs
    refused: ChatTemplateError | None = None  # why the model's own template was not used


def format_chat_prompt(
    template_source: str | None,
    messages: Sequence[Mapping[str, Any]],
    *,
    architecture: str | None,
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool = True,
    model_name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    builtin: str | None = None,
    variables: Mapping[str, Any] | None = None,
) -> tuple[str, str]:
    """(prompt, description of the template used). See the module docstring for the order;
    `builtin` names a llama.cpp built-in format chosen by the person, used instead.
    `variables` are extra template variables (`tools`); the built-in formats ignore them."""
    if builtin:
        try:
            prompt = apply_builtin_template(builtin, messages, add_generation_prompt)
        except ImportError:
            raise ChatTemplateError(
                "The built-in chat formats need llama-cpp-python, which is not installed; "
                "reinstall Hearth.",
                reason="llama-cpp-python is not installed",
                kind="builtin",
            ) from None
        return prompt, f"llama.cpp's built-in '{builtin}' format, chosen for this model"
    explained = explain_chat_prompt(
        template_source, messages, architecture=architecture, bos_token=bos_token,
        eos_token=eos_token, add_generation_prompt=add_generation_prompt,
        model_name=model_name, timeout_s=timeout_s, max_output_chars=max_output_chars,
        variables=variables,
    )  # fmt: skip
    return explained.text, explained.template


def check_model_template(
    template_source: str | None,
    *,
    architecture: str | None,
    bos_token: str,
    eos_token: str,
    model_name: str | None = None,
) -> ChatPrompt:
    """The format a model's chats will be written in, found by writing SAMPLE_CONVERSATION;
    `refused` says why the model's own template is not used, if it has one and it failed."""
    return explain_chat_prompt(
        template_source, SAMPLE_CONVERSATION, architecture=architecture, bos_token=bos_token,
        eos_token=eos_token, model_name=model_name,
    )  # fmt: skip


def explain_chat_prompt(
    template_source: str | None,
    messages: Sequence[Mapping[str, Any]],
    *,
    architecture: str | None,
    bos_token: str,
    eos_token: str,
    add_generation_prompt: bool = True,
    model_name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    variables: Mapping[str, Any] | None = None,
) -> ChatPrompt:
    """format_chat_prompt, with the refusal of the model's template kept (not only described)."""
    failure: ChatTemplateError | None = _distrusted.get(template_source or "")
    if failure is None and template_source and template_source.strip():
        try:
            prompt = render_chat_template(
                template_source,
                messages,
                bos_token=bos_token,
                eos_token=eos_token,
                add_generation_prompt=add_generation_prompt,
                timeout_s=timeout_s,
                max_output_chars=max_output_chars,
                variables=variables,
            )
            return ChatPrompt(prompt, MODEL_TEMPLATE)
        except ChatTemplateError as exc:
            failure = exc
            _distrust(template_source, exc)
    try:
        text, template = _builtin_prompt(template_source, messages, add_generation_prompt,
                                         failure, architecture, model_name)  # fmt: skip
        return ChatPrompt(text, template, failure)
    except ChatTemplateError as exc:
        if failure is None:
            raise
        raise ChatTemplateError(
            f"The model's chat template failed ({failure.reason}), and so did the built-in "
            f"chat format ({exc.reason}). Start a new chat; if it happens again, report it "
            "with the model's name.",
            reason=failure.reason,
            kind=failure.kind,
        ) from None


# Templates that went past a render limit or tried something unsafe, with why: not rendered
# again in this process. One that ran into the time limit would otherwise cost every request
# that limit (2 s) before the built-in format stood in.
_distrusted: dict[str, ChatTemplateError] = {}
_DISTRUSTED_KEPT = 16


def _distrust(template_source: str, failure: ChatTemplateError) -> None:
    # Time (watchdog.py's reason) and unsafe operations say something about the template; a
    # refusal or a size limit may be this conversation's, and the next may pass.
    timed_out = failure.kind == "limit" and "took longer than" in failure.reason
    if not (timed_out or failure.kind == "unsafe"):
        return
    if len(_distrusted) >= _DISTRUSTED_KEPT:
        _distrusted.pop(next(iter(_distrusted)))
    _distrusted[template_source] = failure


def _builtin_prompt(
    template_source: str | None,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool,
    failure: ChatTemplateError | None,
    architecture: str | None,
    model_name: str | None,
) -> tuple[str, str]:
    try:
        if failure is not None and template_source:
            matched = apply_matching_builtin(template_source, messages, add_generation_prompt)
            if matched is not None:
                prompt, name = matched
                return prompt, (
                    f"llama.cpp's built-in '{name}' format, which the model's template matches "
                    f"(that template failed: {failure.reason})"
                )
        name, chosen = builtin_choice(architecture, model_name)
        prompt = apply_builtin_template(name, messages, add_generation_prompt)
    except ImportError:
        raise ChatTemplateError(
            "The built-in chat formats need llama-cpp-python, which is not installed; "
            "reinstall Hearth.",
            reason="llama-cpp-python is not installed",
            kind="builtin",
        ) from None
    why = (
        f"the model's template failed: {failure.reason}"
        if failure
        else "the model has no chat template"
    )
    return prompt, f"llama.cpp's built-in '{name}' format, {chosen} ({why})"


def strip_leading_bos(prompt: str, bos_token: str) -> str:
    """`prompt` without one leading BOS text, for a tokenizer that adds BOS itself."""
    if bos_token and prompt.startswith(bos_token):
        return prompt[len(bos_token) :]
    return prompt
