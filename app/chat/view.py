"""The Chat page: conversations on the left, the transcript and message box in the middle, the
chat settings on the right (hidden until asked for).

Every message is written to the conversation store as it happens (a reply while it streams), so
quitting or a crash loses nothing. The conversation sent to the engine is the shown branch
(finished messages, failed replies left out), after the system prompt, fitted to the context by
the policy the user chose; the worker renders it with the model's chat template and reuses the
KV cache of the turns it has seen.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeySequence, QPalette, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListView,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.chat.actions import MessageActions
from app.chat.attachments import MAX_PENDING, AttachmentStrip
from app.chat.conversation_model import (
    ROLE_USER,
    ChatEntry,
    ConversationModel,
)
from app.chat.engine_source import EngineSource
from app.chat.follow import TranscriptFollower
from app.chat.header import ChatHeader
from app.chat.input_box import ChatInput
from app.chat.message_delegate import MessageDelegate
from app.chat.presets import ChatPresets
from app.chat.replies import ReplyStreaming
from app.chat.session import ChatSession
from app.chat.settings import ChatSettingsPanel, new_chat_settings, sampling_from
from app.chat.sidebar import ConversationSidebar
from app.chat.tool_catalog import ToolCatalog
from app.chat.tool_replies import ToolReplies
from app.chat.transfer import ChatTransfer
from app.common import banner as b
from app.common.accessibility import named
from app.common.engine_bridge import EngineBridge
from engine.chat.presets import PresetLibrary
from engine.chat.prompt import MODEL_TEMPLATE
from engine.chat.sampling_defaults import model_sampling_defaults
from engine.chat.store import ConversationStore
from engine.enums import EngineState
from engine.runtime import protocol as p
from engine.session import ChatFormats

if TYPE_CHECKING:
    from app.common.page_host import PageHost

SIDEBAR_MIN_PAGE_WIDTH = 640  # narrower than this, the transcript gets the room


class TranscriptView(QListView):
    """A list view that repaints a changed row without laying out every row again.

    QListView answers any dataChanged by re-asking every row for its size. A streaming reply
    changes 30 times a second; with a long conversation that relayout would cost more than the
    decode it shows. Here a change only repaints its row, and the delegate asks for a relayout
    (sizeHintChanged) when the row's height really changed.
    """

    def dataChanged(self, top_left, bottom_right, roles=()) -> None:
        QAbstractItemView.dataChanged(self, top_left, bottom_right, roles)


def settings_drawer(panel: QWidget, parent: QWidget) -> QScrollArea:
    """The settings panel in a scroll area: it takes its full width where the page has room,
    and scrolls rather than widening the window where it has not (a short window scrolls it
    too). Opening the settings never makes the window grow."""
    drawer = QScrollArea(parent)
    drawer.setObjectName("chatSettingsDrawer")
    drawer.setWidget(panel)
    drawer.setWidgetResizable(True)
    drawer.setFrameShape(QFrame.Shape.NoFrame)
    drawer.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
    drawer.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
    named(drawer.horizontalScrollBar(), "Scroll the chat settings sideways")
    named(drawer.verticalScrollBar(), "Scroll the chat settings")
    full = panel.sizeHint().width() + drawer.verticalScrollBar().sizeHint().width()
    drawer.setMaximumWidth(full)
    drawer.setMinimumWidth(1)  # set, so the layout does not take the scroll bars' width as least
    drawer.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
    return drawer


class ChatView(MessageActions, ReplyStreaming, ToolReplies, QWidget):
    def __init__(
        self,
        bridge: EngineBridge,
        parent: QWidget | None = None,
        *,
        store: ConversationStore | None = None,
        store_error: str | None = None,
        chat_formats: ChatFormats | None = None,
        host: PageHost | None = None,
        presets: PresetLibrary | None = None,
        remote_choice_path: Path | None = None,
        tool_catalog: ToolCatalog | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.setAutoFillBackground(True)
        self._bridge = bridge
        # Without a store (tests, a store that failed to open) chats live in memory only.
        self.session = ChatSession(store or ConversationStore.open(":memory:"), self)
        self.session.save_failed.connect(
            lambda why: self.notice.show_message(b.ERROR, "The reply was not saved", why)
        )
        self.assistant_name = "Assistant"
        self._request_id: int | None = None
        self._reply_row: int | None = None
        self._editing_row: int | None = None
        self._context_used = 0  # tokens the last reply took, as counted by...
        self._context_model = ""  # ...this model file (another model's count is not shown)

        self.notice = b.Banner(self)
        self.notice.setObjectName("chatNotice")
        self.context_notice = b.Banner(self)
        self.context_notice.setObjectName("contextNotice")
        # Its own strip: the notice above (the demo model's, say) stays while a message is edited.
        self.edit_notice = b.Banner(self)
        self.edit_notice.setObjectName("editNotice")
        self.header = ChatHeader(self)
        self._chat_formats = chat_formats or ChatFormats()
        self.header.format_chosen.connect(self._remember_format)
        # Presets sit in the header, before the settings button (app/chat/presets.py).
        self.presets = ChatPresets(self, presets or PresetLibrary(), host)
        header_row = self.header.layout()
        header_row.insertWidget(
            header_row.indexOf(self.header.settings_button), self.presets.picker
        )
        # The engine the replies come from: this computer's, or a remote server's model (its
        # button under the message box, where it takes none of the header's width).
        self.engine_source = EngineSource(self, self.notice, remote_choice_path)
        self.remote = self.engine_source.remote
        self.sidebar = ConversationSidebar(self.session.store, self)
        self.sidebar.chosen.connect(self.open_conversation)
        self.sidebar.new_requested.connect(self.new_chat)
        self.sidebar.deleted.connect(self._on_conversation_deleted)
        self.transfer = ChatTransfer(self.session.store, self, self.notice)
        self.transfer.imported.connect(self._on_chats_imported)
        self.sidebar.export_requested.connect(
            lambda chat_id: self.transfer.export_dialog([chat_id])
        )
        self.settings_panel = ChatSettingsPanel(self)
        self.settings_panel.changed.connect(self._on_settings_changed)
        # MCP tools: the settings' Tools section, the approval bar (app/chat/tool_replies.py).
        self._init_tools(tool_catalog)
        self.settings_drawer = settings_drawer(self.settings_panel, self)
        self.settings_drawer.hide()
        self.header.settings_button.toggled.connect(self._show_settings)
        self._chats_asked = False  # the person asked for the chat list where it had given way
        self.header.chats_button.toggled.connect(self._show_chats)

        self.model = ConversationModel(self)
        self.transcript = named(TranscriptView(self), "Conversation")
        self.transcript.setObjectName("transcript")
        self.transcript.setModel(self.model)
        self.transcript.setFrameShape(QFrame.Shape.NoFrame)
        self.transcript.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.transcript.verticalScrollBar().setSingleStep(24)
        self.transcript.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.transcript.setResizeMode(QListView.ResizeMode.Adjust)
        self.transcript.setUniformItemSizes(False)
        self.transcript.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.transcript.setMouseTracking(True)  # the hand cursor over Copy and Thought links
        self.transcript.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.transcript.customContextMenuRequested.connect(self._show_context_menu)
        self.delegate = MessageDelegate(self.transcript)
        self.transcript.setItemDelegate(self.delegate)
        # A reply that grows may change its row's height; the delegate relayouts only then.
        self.model.dataChanged.connect(
            lambda top_left, _bottom_right, _roles=(): self.delegate.row_changed(top_left)
        )
        # The delegate caches layouts by row: rows that move invalidate it.
        self.model.modelReset.connect(self.delegate.clear_cache)
        self.model.rowsRemoved.connect(self.delegate.clear_cache)
        self.delegate.version_step.connect(self.show_version)
        self.delegate.action.connect(self.on_message_action)
        self.delegate.text_menu.connect(self._show_text_menu)
        # Follows a streaming reply to its end unless the person scrolled up.
        self.follower = TranscriptFollower(self.transcript)
        self._model_defaults: dict[str, dict] = {}  # sampling each model file recommends
        self._start_settings = self.settings_panel.values()  # what the new chat started with

        self.input = named(ChatInput(self), "Message", "Enter sends; Shift+Enter starts a new line")
        self.input.setObjectName("chatInput")
        self.input.submitted.connect(self.send)
        self.attachments = AttachmentStrip(self)
        self.input.attached.connect(self._attach)
        self.input.refused.connect(self._image_refused)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(True)
        self.send_button.setToolTip("Send (Enter)")
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.stop_button.clicked.connect(self.stop)
        self.new_chat_button = QPushButton("New chat")
        self.new_chat_button.setObjectName("newChatButton")
        self.new_chat_button.setFlat(True)
        self.new_chat_button.setToolTip("New chat (Ctrl+N)")
        self.new_chat_button.clicked.connect(self.new_chat)

        composer = QFrame(self)
        composer.setObjectName("composer")
        composer_layout = QHBoxLayout(composer)
        composer_layout.setContentsMargins(6, 6, 6, 6)
        composer_layout.setSpacing(6)
        composer_layout.addWidget(self.input, 1)
        composer_layout.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignBottom)
        composer_layout.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)

        hint = QLabel("Enter to send · Shift+Enter for a new line · Esc to stop · Ctrl+N new chat")
        hint.setObjectName("composerHint")
        # A hint, not content: it may be cut short rather than hold the page wide.
        hint.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        hints = QHBoxLayout()
        hints.setContentsMargins(4, 0, 0, 0)
        hints.addWidget(hint, 1)
        hints.addWidget(self.engine_source.button)
        hints.addWidget(self.new_chat_button)

        bottom = QVBoxLayout()
        bottom.setContentsMargins(18, 6, 18, 8)
        bottom.setSpacing(2)
        bottom.addWidget(self.attachments)
        bottom.addWidget(composer)
        bottom.addLayout(hints)
        bottom.insertWidget(0, self.tool_approval)  # above the message box while it asks

        center = QVBoxLayout()
        center.setContentsMargins(0, 0, 0, 0)
        center.setSpacing(0)
        center.addWidget(self.notice)
        center.addWidget(self.header)
        center.addWidget(self.context_notice)
        center.addWidget(self.edit_notice)
        center.addWidget(self.transcript, 1)
        center.addLayout(bottom)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.sidebar)
        layout.addLayout(center, 1)
        self._center = center
        layout.addWidget(self.settings_drawer)
        # The sidebar hides on a narrow page (resizeEvent), so it must not set a minimum width.
        layout.setSizeConstraint(QHBoxLayout.SizeConstraint.SetNoConstraint)

        stop_shortcut = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        stop_shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        stop_shortcut.activated.connect(self._on_escape)
        new_shortcut = QShortcut(QKeySequence.StandardKey.New, self)
        new_shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
        new_shortcut.activated.connect(self.new_chat)
        copy_shortcut = QShortcut(QKeySequence.StandardKey.Copy, self.transcript)
        copy_shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
        copy_shortcut.activated.connect(self.copy_selected)

        self.remote.token_text.connect(self._on_token_text)
        self.remote.generation_done.connect(self._on_generation_done)
        self.remote.generation_failed.connect(self._on_generation_failed)
        self.remote.changed.connect(self._update_buttons)
        bridge.token_text.connect(self._on_token_text)
        bridge.generation_done.connect(self._on_generation_done)
        bridge.generation_failed.connect(self._on_generation_failed)
        bridge.prompt_fitted.connect(self._on_prompt_fitted)
        bridge.command_failed.connect(self._on_command_failed)
        bridge.engine_crashed.connect(self._on_engine_crashed)
        bridge.model_loaded.connect(self._on_model_loaded)
        bridge.model_loaded.connect(self._show_formats)
        # No model, no context: the counter says so rather than keep the gone model's figures.
        bridge.engine_crashed.connect(lambda _crash: self._show_usage())
        bridge.load_failed.connect(lambda _failed: self._show_usage())
        bridge.chat_template_changed.connect(self._on_template_changed)
        bridge.state_changed.connect(self._update_buttons)
        self._update_buttons()
        self._show_usage()
        if store_error:
            self.notice.show_message(b.ERROR, "Chats will not be saved", store_error)

    def changeEvent(self, event: QEvent) -> None:
        # The system switched between light and dark: code colours are baked into the cached
        # layouts, so they are made again with the new palette.
        # (Qt also sends one while the page is being built, before the delegate exists.)
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "delegate"):
            # A style sheet's palette(base) is resolved when a widget is polished: polish the
            # transcript again so that it takes the new colours too.
            self.transcript.style().unpolish(self.transcript)
            self.transcript.style().polish(self.transcript)
            self.delegate.clear_cache()
            self.transcript.doItemsLayout()
            self.transcript.viewport().update()
        super().changeEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._arrange(event.size().width())
        super().resizeEvent(event)

    def _show_settings(self, shown: bool) -> None:
        # The list gives way before the drawer appears: shown beside it for a moment, the
        # drawer would make a page at its narrowest wider than the window.
        if shown:
            self._chats_asked = False  # the settings take the room the person gave the list
        self._arrange(self.width(), settings_shown=shown)
        self.settings_drawer.setVisible(shown)

    def _show_chats(self, shown: bool) -> None:
        """The header's Chats button: the list back, in place of the settings if need be."""
        self._chats_asked = shown
        if shown and self.settings_drawer.isVisibleTo(self):
            self.header.settings_button.setChecked(False)
        self._arrange(self.width())

    def _arrange(self, page_width: int, *, settings_shown: bool | None = None) -> None:
        """The conversation list gives way first: to a narrow page, then to the settings, and
        to a header or composer that needs the room (a long preset name); the header's Chats
        button then brings it back."""
        room = page_width
        if settings_shown is None:
            settings_shown = self.settings_drawer.isVisibleTo(self)
        if settings_shown:
            room -= self.settings_drawer.maximumWidth()
        needed = max(
            SIDEBAR_MIN_PAGE_WIDTH, self._center.minimumSize().width() + self.sidebar.width()
        )
        fits = room >= needed
        self.sidebar.setVisible(fits or self._chats_asked)
        button = self.header.chats_button
        button.setVisible(not fits)
        button.blockSignals(True)
        button.setChecked(self.sidebar.isVisibleTo(self))
        button.blockSignals(False)

    # -- settings -------------------------------------------------------------------------------

    @property
    def sampling(self) -> p.SamplingParams:
        return sampling_from(self.settings_panel.values())

    @sampling.setter
    def sampling(self, sampling: p.SamplingParams) -> None:
        seed = -1 if sampling.seed == 0xFFFFFFFF else sampling.seed
        values = {k: getattr(sampling, k) for k in ("temperature", "top_p", "top_k", "min_p")}
        values.update(repeat_penalty=sampling.repeat_penalty, seed=seed, preset="Custom")
        self.settings_panel.set_values({**self.settings_panel.values(), **values})

    @property
    def max_tokens(self) -> int:
        return self.settings_panel.max_tokens.value()

    @max_tokens.setter
    def max_tokens(self, value: int) -> None:
        self.settings_panel.max_tokens.setValue(value)

    @property
    def system_prompt(self) -> str:
        return self.settings_panel.values()["system_prompt"]

    def _on_settings_changed(self) -> None:
        chat_id = self.session.conversation_id
        if chat_id is not None:
            values = self.settings_panel.values()
            self.session.store.set_settings(chat_id, self.with_tools_off(values))
            self.session.store.set_system_prompt(chat_id, values["system_prompt"])

    # -- actions --------------------------------------------------------------------------------

    @property
    def generating(self) -> bool:
        """A reply is being written, or its tool calls are being asked about or run."""
        return self._request_id is not None or self.tools_busy

    @property
    def request_id(self) -> int | None:
        """The engine request of the reply being written (None between replies)."""
        return self._request_id

    def _attach(self, attachment) -> None:
        if not self.attachments.add(attachment):
            self._image_refused(
                f"{MAX_PENDING} images are waiting already; send them, or remove one (click it)."
            )

    def _image_refused(self, why: str) -> None:
        self.notice.show_message(b.ERROR, "The image was not added", why)

    def send(self) -> None:
        text = self.input.toPlainText().strip()
        images = self.attachments.attachments()
        if not (text or images) or not self.send_button.isEnabled():
            return
        settings = self.with_tools_off(self.settings_panel.values())
        # An image alone is a question too (the model describes it), titled as one.
        chat_id = self.session.ensure_conversation(text or "Image", settings)
        if self._editing_row is not None:
            # Edit and resend: the new text is a sibling of the old, whose branch is kept.
            old = self.model.entry(self._editing_row)
            parent = (
                self.session.store.message(old.message_id).parent_id if old.message_id else None
            )
            if self._editing_row == 0:
                self.session.retitle_for_first_message(old.text, text)
            images = images or old.images  # an edited question keeps its images
            self.model.truncate(self._editing_row)
            self._cancel_edit()
        else:
            parent = self._last_message_id()
        user_id = self.session.store.add_message(
            chat_id, ROLE_USER, text, parent_id=parent, attachments=images
        )
        versions = self.session.versions(user_id)
        self.model.append(
            ChatEntry(
                role=ROLE_USER, text=text, message_id=user_id, branches=versions, images=images
            )
        )
        self.input.clear()
        self.attachments.clear()
        self.sidebar.set_current(chat_id)
        self.header.title.setText(self.session.store.conversation(chat_id).title)
        self._start_reply(user_id)

    def stop(self) -> None:
        if self.tools_busy:
            self.stop_tools()
        elif self._request_id is not None and self.remote.generating:
            self.remote.stop()
        elif self._request_id is not None:
            self._bridge.stop()

    def new_chat(self) -> None:
        self.stop()
        self._end_reply()
        self._cancel_edit()
        self.session.conversation_id = None
        self.reset_tools_for_chat()
        self.model.clear()
        # The loaded model's defaults, not the settings of the chat that was open.
        self._start_settings = self.new_chat_settings()
        self.settings_panel.set_values(self._start_settings)
        self.context_notice.hide()
        self.header.title.setText("New chat")
        self.sidebar.set_current(None)
        self._context_used, self._context_model = 0, ""
        self._show_usage()
        self.input.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.session.conversation_id and self.model.rowCount():
            return
        self.stop()
        self._end_reply()
        self._cancel_edit()
        chat = self.session.store.conversation(conversation_id)
        self.session.conversation_id = conversation_id
        self.reset_tools_for_chat(chat.settings)
        self.settings_panel.set_values({**chat.settings, "system_prompt": chat.system_prompt})
        self.presets.show_none()
        self.model.set_entries(self.session.entries(self.assistant_name))
        self.header.title.setText(chat.title)
        self.sidebar.set_current(conversation_id)
        self.context_notice.hide()
        replies = [m for m in self.session.store.branch(conversation_id) if m.stats.n_generated]
        last = replies[-1].stats if replies else None
        self._context_used = (last.n_prompt_tokens or 0) + (last.n_generated or 0) if last else 0
        self._context_model = Path(replies[-1].model).name if replies else ""
        self._show_usage()
        self.follower.jump_to_latest()

    def new_chat_settings(self) -> dict:
        """Settings for a new chat: Hearth's defaults and what the loaded model recommends."""
        loaded = self._bridge.model
        if loaded is None:
            return self.presets.for_new_chat(new_chat_settings(), None)
        if loaded.path not in self._model_defaults:
            self._model_defaults[loaded.path] = model_sampling_defaults(loaded.path)
        defaults = new_chat_settings(self._model_defaults[loaded.path])
        return self.presets.for_new_chat(defaults, loaded.path)  # the model's preset, if any

    # -- helpers --------------------------------------------------------------------------------

    def _last_message_id(self) -> int | None:
        ids = [e.message_id for e in self.model.entries() if e.message_id is not None]
        return ids[-1] if ids else None

    def export_current_chat(self) -> None:
        chat_id = self.session.conversation_id
        self.transfer.export_dialog([] if chat_id is None else [chat_id])

    def _on_chats_imported(self, conversation_ids: tuple) -> None:
        self.sidebar.refresh()
        if conversation_ids and not self.generating:
            self.open_conversation(conversation_ids[0])

    def _on_conversation_deleted(self, conversation_id: int) -> None:
        if conversation_id == self.session.conversation_id:
            self.new_chat()

    def _on_escape(self) -> None:
        if self.generating:
            self.stop()
        elif self._editing_row is not None:
            self._cancel_edit()
            self.input.clear()

    def _cancel_edit(self) -> None:
        if self._editing_row is not None:
            self._editing_row = None
            self.edit_notice.hide()

    def _on_model_loaded(self, loaded: p.ModelLoaded) -> None:
        self.header.show_template(loaded.chat_template, loaded.chat_template_problem)
        self.input.setPlaceholderText(
            "Message the model, or drop or paste an image" if loaded.vision else "Message the model"
        )
        untouched = self.settings_panel.values() == self._start_settings
        if self.session.conversation_id is None and not self.model.rowCount() and untouched:
            # Nothing sent, nothing changed by hand: start from this model's defaults.
            self._start_settings = self.new_chat_settings()
            self.settings_panel.set_values(self._start_settings)
        self._show_usage()

    def show_template_notice(self, loaded: p.ModelLoaded) -> bool:
        """Say in full, above the transcript, why the model's own chat template was refused (the
        window calls it after a load, as it owns the other notices); False when it was not."""
        if not loaded.chat_template_problem:
            return False
        self.notice.show_message(
            b.ERROR, "This model's chat template was refused", loaded.chat_template_problem
        )
        return True

    def _on_template_changed(self, changed: p.ChatTemplateChanged) -> None:
        """Mid-chat, the model's template refused this conversation (or took it again)."""
        loaded = self._bridge.model
        problem = loaded.chat_template_problem if loaded is not None else ""
        if not problem and changed.template != MODEL_TEMPLATE and "failed" in changed.template:
            problem = f"The model's chat template failed on this conversation: {changed.template}."
        self.header.show_template(changed.template, problem)

    def _show_formats(self, loaded: p.ModelLoaded) -> None:
        self.header.show_formats(loaded, self._chat_formats.get(loaded.path))

    def _remember_format(self, chat_format: str) -> None:
        loaded = self._bridge.model
        if loaded is not None:
            self._chat_formats.put(loaded.path, chat_format)

    def _show_usage(self) -> None:
        """The context counter of the loaded model: its own count after its last reply here,
        else "not counted yet" (another model's count is for another tokenizer)."""
        loaded = self._bridge.model
        if loaded is None:
            self.header.set_usage(0, 0)
        elif self._context_model and self._context_model == Path(loaded.path).name:
            self.header.set_usage(self._context_used, loaded.n_ctx)
        elif self.model.rowCount():
            self.header.set_usage(None, loaded.n_ctx)  # counted when this model answers here
        else:
            self.header.set_usage(0, loaded.n_ctx)

    def _update_buttons(self, *_args) -> None:
        state = self._bridge.state
        if self.remote.active:  # the remote server answers whatever the local engine does
            state = EngineState.GENERATING if self.remote.generating else EngineState.IDLE
        self.send_button.setEnabled(state == EngineState.IDLE and not self.generating)
        self.stop_button.setEnabled(
            self.tools_busy or (self.generating and state == EngineState.GENERATING)
        )
        can_reply = state in (EngineState.IDLE, EngineState.GENERATING)
        if (self.delegate.versions_enabled, self.delegate.can_reply) != (
            not self.generating,
            can_reply,
        ):
            self.delegate.versions_enabled = not self.generating
            self.delegate.can_reply = can_reply
            self.transcript.viewport().update()
