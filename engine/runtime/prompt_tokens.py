"""A Generate command's prompt as tokens: raw token ids, plain text, or a conversation written
in the model's chat template (or a chosen built-in format) and fitted to the context by exact
token counts. Works on any engine's model through the seam's Vocabulary (engine_api.py).

The worker keeps one `PromptBuilder` per loaded model: it remembers which template chats are
written in, so a change (the model's own template failed, or tried something unsafe) is said
once, where the person sees it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from engine.chat.context_fit import fit_conversation
from engine.chat.images import ImageRefused, check_images, decode_base64_image
from engine.enums import Overflow
from engine.runtime import protocol as p
from engine.runtime.engine_api import EngineError, MediaPrompt, Model, Vocabulary, vision_refusal
from engine.runtime.prompt_bounds import BoundedTokenizer, TokenizeBudget, check_prompt_text


class PromptBuilder:
    def __init__(self, model: Model, send: Callable[[Any], None]):
        self.model = model
        self.tokenizer = BoundedTokenizer(model)
        self._send = send
        self.template_note, self.template_problem = _check_template(model)

    def tokens(self, command: p.Generate, n_ctx: int) -> list[int]:
        """The prompt of `command` for a sequence whose share of the cache is `n_ctx` tokens.
        Raises ValueError (a bad request; PromptTooCostly past a bound on tokenizing),
        TokenizerBusy or ContextOverflow (the conversation does not fit). Images are refused
        here: only the single-sequence path takes them (`prompt`)."""
        tokens, media = self.prompt(command, n_ctx)
        if media is not None:
            media.close()
            raise ValueError(
                "Images are decoded one request at a time; this model is loaded for several "
                "requests together. Load it with one parallel request to send images."
            )
        return tokens

    def prompt(self, command: p.Generate, n_ctx: int) -> tuple[list[int], MediaPrompt | None]:
        """As `tokens`, and the prompt with its images when the conversation holds any: its
        tokens then have a stand-in id for each position an image takes (engine_api.py)."""
        model = self.model
        budget = TokenizeBudget()
        if command.prompt_tokens:
            bad = [t for t in command.prompt_tokens if not 0 <= t < model.n_vocab]
            if bad:
                raise ValueError(f"Token id {bad[0]} is outside the vocabulary.")
            return list(command.prompt_tokens), None
        if command.prompt is not None:
            return self.tokenizer.tokenize(command.prompt, budget, add_special=True), None
        if not command.messages:
            raise ValueError("Nothing to answer: the conversation is empty.")
        images = _images_of(command.messages)
        if images:
            refused = vision_refusal(model.capabilities)
            if refused:
                raise ValueError(refused)
        reply_room = command.reply_room or min(command.max_tokens, n_ctx // 4)
        rendered: dict[int, list[int]] = {}  # the last fitting's tokens, by message count
        media: dict[int, MediaPrompt] = {}

        def count(messages: list) -> int:
            n = len(messages)
            if n in media:
                media.pop(n).close()
            if any(m.images for m in messages):
                media[n] = self.media_prompt(messages, command, images)
                rendered[n] = media[n].tokens
            else:
                rendered[n] = self.chat_tokens(
                    messages, command.chat_format, command.tools_json,
                    continue_last=command.continue_last, budget=budget,
                )  # fmt: skip
            return len(rendered[n])

        try:
            fitted = fit_conversation(
                list(command.messages),
                count,
                n_ctx - reply_room,
                drop_oldest=command.overflow == Overflow.DROP_OLDEST,
            )
        except BaseException:
            for left in media.values():
                left.close()
            raise
        chosen = media.pop(len(fitted.messages), None)
        for left in media.values():
            left.close()
        if fitted.dropped:
            self._send(
                p.PromptFitted(
                    request_id=command.request_id,
                    n_prompt_tokens=fitted.n_tokens,
                    messages_dropped=fitted.dropped,
                )
            )
        return rendered[len(fitted.messages)], chosen

    def media_prompt(
        self, messages: list[p.ChatMessage], command: p.Generate, images: dict[str, bytes]
    ) -> MediaPrompt:
        """`messages` written with the chat template, a marker where each image goes (before
        its message's text, as vision models were trained), and their images: one prompt."""
        marker = self.model.media_marker
        shown: list[bytes] = []
        with_markers = []
        for m in messages:
            shown.extend(images[b64] for b64 in m.images)
            text = marker * len(m.images) + m.content
            with_markers.append(replace(m, content=text, images=()))
        if command.continue_last and len(messages) > 1 and messages[-1].role == "assistant":
            text = self.chat_text(with_markers[:-1], command.chat_format, command.tools_json)
            text += with_markers[-1].content
        else:
            text = self.chat_text(with_markers, command.chat_format, command.tools_json)
        check_prompt_text(self.model, text)
        try:
            return self.model.media_prompt(text, shown)
        except EngineError as exc:
            raise ValueError(str(exc)) from None

    def chat_tokens(
        self,
        messages: list[p.ChatMessage],
        chat_format: str = "",
        tools_json: str = "",
        *,
        continue_last: bool = False,
        budget: TokenizeBudget | None = None,
    ) -> list[int]:
        """`messages` with the model's chat template (or the chosen format) applied, and the
        tools offered, as tokens. `continue_last`: the last message is a reply to go on with:
        the others are rendered up to the opening of a reply, and its text follows as it is.
        `budget`: the request's time for tokenizing (a fresh one if not given)."""
        budget = budget or TokenizeBudget()
        tokenize = self.tokenizer.tokenize
        if continue_last and len(messages) > 1 and messages[-1].role == "assistant":
            opened = self.chat_tokens(messages[:-1], chat_format, tools_json, budget=budget)
            return opened + tokenize(
                messages[-1].content, budget, add_special=False, parse_special=False
            )
        if chat_format == p.PLAIN_COMPLETION:
            # A base model continues text: the conversation is one document, no roles.
            return tokenize("".join(m.content for m in messages), budget, add_special=True)
        text = self.chat_text(messages, chat_format, tools_json)
        return tokenize(text, budget, add_special=True, parse_special=True)

    def chat_text(
        self, messages: list[p.ChatMessage], chat_format: str = "", tools_json: str = ""
    ) -> str:
        """`messages` with the model's chat template (or the chosen format) applied, as the
        text the tokenizer reads (BOS left to the tokenizer). The special-string bound is the
        caller's: the tokenizer's (BoundedTokenizer), or check_prompt_text before mtmd's."""
        from engine.chat import ChatTemplateError, format_chat_prompt

        model = self.model
        if chat_format == p.PLAIN_COMPLETION:
            return "".join(m.content for m in messages)
        try:
            text, how = format_chat_prompt(
                None if chat_format else model.chat_template(),
                [_message_for_template(m) for m in messages],
                architecture=model.meta("general.architecture"),
                model_name=model.meta("general.name"),
                bos_token=model.bos_text(),
                eos_token=model.eos_text(),
                add_generation_prompt=True,
                builtin=chat_format or None,
                variables={"tools": json.loads(tools_json)} if tools_json else None,
            )
        except ChatTemplateError as exc:
            raise ValueError(str(exc)) from None
        if how != self.template_note:
            # Said once per change: a model whose own template failed falls back silently
            # otherwise, and a template that tried something unsafe is worth knowing about.
            print(f"hearth worker: chat template: {how}", flush=True)
            self.template_note = how
            self._send(p.ChatTemplateChanged(template=how))
        bos = model.bos_text()
        if model.adds_bos() and bos and text.startswith(bos):
            text = text[len(bos) :]  # the tokenizer adds BOS itself: never two
        return text

    def format_choices(self) -> dict:
        """For a model without a chat template: the built-in formats a person may pick from,
        and the one that fits best (the GUI process never loads llama.cpp, so the worker tells
        it). Empty for a model with its own template."""
        if self.model.chat_template():
            return {}
        from engine.chat.builtin import builtin_choice, builtin_template_names

        model = self.model
        name, _why = builtin_choice(model.meta("general.architecture"), model.meta("general.name"))
        return {"builtin_formats": tuple(builtin_template_names()), "suggested_format": name}


def _message_for_template(m: p.ChatMessage) -> dict[str, Any]:
    """A message as chat templates take it: tool calls as data, not JSON text."""
    message: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls_json:
        message["tool_calls"] = json.loads(m.tool_calls_json)
    if m.tool_call_id:
        message["tool_call_id"] = m.tool_call_id
    if m.name:
        message["name"] = m.name
    return message


def _check_template(model: Vocabulary) -> tuple[str, str]:
    """The format chats will be written in, and why the model's own template was refused ("" if
    it was not): said at the load, where the person sees it, not only in the worker's log."""
    from engine.chat import ChatTemplateError, check_model_template

    try:
        checked = check_model_template(
            model.chat_template(),
            architecture=model.meta("general.architecture"),
            model_name=model.meta("general.name"),
            bos_token=model.bos_text(),
            eos_token=model.eos_text(),
        )
    except ChatTemplateError as exc:
        return "none that works", str(exc)
    if checked.refused is None:
        return checked.template, ""
    print(f"hearth worker: chat template: {checked.template}", flush=True)
    return checked.template, f"{checked.refused} Chats are written in {checked.template} instead."


def _images_of(messages) -> dict[str, bytes]:
    """The conversation's images, decoded from base64 once (the same image in several turns
    once), each checked before llama.cpp's decoder sees it (engine/chat/images.py)."""
    found = {b64: b"" for m in messages for b64 in m.images}
    if not found:
        return {}
    try:
        decoded = {b64: decode_base64_image(b64) for b64 in found}
        check_images(list(decoded.values()))
    except ImageRefused as exc:
        raise ValueError(str(exc)) from None
    return decoded
