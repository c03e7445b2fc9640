"""Replies: fitting the conversation to the context, asking the engine, following the stream
into the transcript and the store, and ending it (done, failed, or the engine gone).
Mixed into ChatView.
"""

from __future__ import annotations

from pathlib import Path

from app.chat.context import used_tokens
from app.chat.conversation_model import ROLE_ASSISTANT, ChatEntry, stats_line
from app.chat.session import author_label, message_stats
from app.chat.settings import sampling_from
from app.common import banner as b
from engine.enums import StopReason
from engine.runtime import protocol as p
from engine.tools.transcript import strip_calls
from engine.untrusted_text import printable_line


class ReplyStreaming:
    """Needs the ChatView's bridge, model, session, transcript, banners and buttons."""

    def _start_reply(self, parent_id: int | None) -> None:
        settings = self.settings_panel.values()
        loaded = self._bridge.model
        # Tools: an OpenAI server takes them as `tools`; a local template that renders them
        # gets them too, else they are described in the system message.
        native = self.remote.active or bool(loaded and loaded.template_takes_tools)
        messages, tools_json, tools = self.messages_for_reply(
            settings["system_prompt"], native=native
        )
        if self.remote.active:
            # The server fits the conversation to its own context.
            model_name = printable_line(self.remote.model_name)
            author = model_name or self.assistant_name
            request_id = self.remote.generate(
                messages,
                sampling=sampling_from(settings),
                max_tokens=settings["max_tokens"],
                tools=tools,
            )
            not_ready = "Choose a remote server's model in the Engine menu, then try again."
        else:
            # Stored with the reply: a file name that is not UTF-8 (lone surrogates) cannot be
            # written to SQLite as it is, and is shown escaped anyway.
            model_name = printable_line(Path(loaded.path).name) if loaded else ""
            author = author_label(model_name, self.assistant_name)
            # The worker fits the conversation to the context with its tokenizer (exact
            # counts); room for the reply: Max tokens, but never most of a small context (a
            # reply that fills it still stops with a "context full" notice).
            request_id = self._generate_here(messages, settings, tools_json=tools_json)
            not_ready = "The engine is not ready; wait for the model to load and try again."
        if request_id is None:
            self._end_tool_rounds()
            self.model.append(
                ChatEntry(
                    role=ROLE_ASSISTANT, text="", author=author, footer=not_ready, failed=True
                )
            )
        else:
            self._request_id = request_id
            message_id = self.session.start_reply(parent_id, model_name, settings)
            self._reply_row = self.model.append(
                ChatEntry(
                    role=ROLE_ASSISTANT,
                    text="",
                    author=author,
                    streaming=True,
                    message_id=message_id,
                    branches=self.session.versions(message_id),  # a regenerated one: n/n
                )
            )
        self.follower.jump_to_latest()  # sending a message means wanting to see the answer
        self._update_buttons()

    def continue_reply(self, row: int) -> None:
        """Have the model go on with the reply at `row` (the last, cut short), in place."""
        entry = self.model.entry(row)
        if (
            self.generating
            or self.remote.active  # the OpenAI API has no "go on with this reply"
            or not self.send_button.isEnabled()
            or row != self.model.rowCount() - 1
            or entry.role != ROLE_ASSISTANT
            or entry.message_id is None
        ):
            return
        settings = self.settings_panel.values()
        request_id = self._generate_here(
            self.model.chat_messages(settings["system_prompt"]), settings, continue_last=True
        )
        if request_id is None:
            return
        self._request_id = request_id
        self._reply_row = row
        self.session.continue_reply(entry.message_id, entry.text)
        self.model.update(row, streaming=True, footer="")
        self.follower.jump_to_latest()
        self._update_buttons()

    def _generate_here(self, messages, settings: dict, **extra) -> int | None:
        """A reply from the loaded model with the chat's settings: room for it is Max tokens,
        but never most of a small context."""
        loaded = self._bridge.model
        n_ctx = loaded.n_ctx if loaded else 0
        return self._bridge.generate(
            messages,
            sampling=sampling_from(settings),
            max_tokens=settings["max_tokens"],
            overflow=settings["overflow"],
            reply_room=min(settings["max_tokens"], n_ctx // 4),
            chat_format=self.header.current_format(),
            **extra,
        )

    def _on_token_text(self, request_id: int, text: str, _n_tokens: int) -> None:
        if request_id != self._request_id or self._reply_row is None:
            return
        # The follower keeps the end in view as the row grows, unless the person scrolled up.
        self.model.append_text(self._reply_row, text)
        self.session.reply_grew(self.model.entry(self._reply_row).text)

    def _on_generation_done(self, done: p.GenerationDone) -> None:
        if done.request_id != self._request_id:
            return
        text = self._reply_text()
        calls = self.tool_calls_in(text) if done.stop_reason != StopReason.STOPPED else None
        if calls and self._reply_row is not None:
            # The calls become rows of their own (app/chat/tool_replies.py); the reply keeps
            # what it said around them.
            text = strip_calls(text)
            self.model.update(self._reply_row, text=text)
        self.session.finish_reply(
            text, stats=message_stats(done.stats), stop_reason=done.stop_reason
        )
        self._context_used = used_tokens(done.stats)
        loaded = self._bridge.model
        self._context_model = Path(loaded.path).name if loaded else ""
        self._show_usage()
        if done.stop_reason == StopReason.CONTEXT_FULL:
            self.context_notice.show_message(
                b.ERROR,
                "The reply stopped: the context is full",
                "Start a new chat, set “Context full” to drop the oldest turns in Settings, or "
                "load the model with a longer context.",
            )
        row = self._reply_row
        self._finish_reply(stats_line(done))
        if row is not None and calls:
            self.tools_after_reply(row, calls)
        else:
            self._end_tool_rounds()

    def _on_prompt_fitted(self, fitted: p.PromptFitted) -> None:
        if fitted.request_id != self._request_id:
            return
        self.context_notice.show_message(
            b.INFO,
            "Oldest turns left out",
            f"{fitted.messages_dropped} of the oldest messages no longer fit the context and were "
            "not sent to the model (they are still here and saved).",
        )

    def _on_generation_failed(self, failed: p.GenerationFailed) -> None:
        if failed.context_full and failed.request_id == self._request_id:
            self.context_notice.show_message(b.ERROR, "The context is full", failed.message)
        if failed.request_id == self._request_id:
            footer = f"The reply failed: {failed.message}"
            self.session.finish_reply(self._reply_text(), stop_reason=footer, failed=True)
            self._finish_reply(footer, failed=True)

    def _on_command_failed(self, failed: p.CommandFailed) -> None:
        if failed.command == "Generate" and self.generating:
            footer = f"The engine could not reply: {failed.message}"
            self.session.finish_reply(self._reply_text(), stop_reason=footer, failed=True)
            self._finish_reply(footer, failed=True)

    def _on_engine_crashed(self, crash) -> None:
        if self.generating:
            self.session.interrupt_reply(self._reply_text())
            if self._reply_row is not None:
                self.model.update(self._reply_row, partial=True)
            lost = ", ".join(getattr(crash, "lost_helpers", ()))
            footer = (
                f"Interrupted: the helper machine {lost} went away. The model is loading again "
                "without it."
                if lost
                else "Interrupted: the engine process stopped. Reload the model to go on."
            )
            self._finish_reply(footer, failed=True)

    def _reply_text(self) -> str:
        return self.model.entry(self._reply_row).text if self._reply_row is not None else ""

    def _finish_reply(self, footer: str, *, failed: bool = False) -> None:
        if self._reply_row is not None:
            self.model.finish(self._reply_row, footer, failed=failed)
        if failed:
            self._end_tool_rounds()
        self._end_reply()

    def _end_reply(self) -> None:
        self._request_id = None
        self._reply_row = None
        self._update_buttons()
