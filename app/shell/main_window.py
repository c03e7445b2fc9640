"""Hearth's main window: left navigation, the pages, the File menu, the status bar, and the
engine's crash and error reports.

Opening a model (File › Open, a drop, `--model`, the Library, start-up, "Load … again", Reload)
always goes through `open_model_file`, that is through the ModelOpener and the engine's one load
policy: the GGUF header is read before the engine is touched (a bad file is refused with a message
and the loaded model stays loaded), and a model is loaded only with settings the planner checked
against the shared machine snapshot. A model that fits nowhere is not loaded: a banner says what
it would need and offers the nearest plans that fit.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, Qt, QUrl
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDesktopServices,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QKeySequence,
)
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QMainWindow,
    QMessageBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.chat.view import ChatView
from app.common import banner as b
from app.common.accessibility import order_window_tabs
from app.common.engine_bridge import EngineBridge
from app.common.file_text import plain_tooltip, rich_escape
from app.common.machine_state import MachineState
from app.common.model_opener import ModelOpener
from app.common.theme import apply_theme
from app.shell.pages import CHAT, LIBRARY, MODEL, PageSpec, default_pages, placeholder_page
from app.shell.preferences import PreferencesDialog, about_text, doc_links, hearth_version
from engine.enums import Engine, EngineState
from engine.runtime import protocol as p
from engine.runtime.client import EngineCrashed
from engine.runtime.engine_output import report_lines
from engine.session import LoadDecision, RememberedSettings
from engine.session.preferences import Preferences, load_preferences, save_preferences
from engine.starter_model import STARTER_LABEL, STARTER_NOTE, is_starter_model
from engine.untrusted_text import printable_line

STATE_TEXT = {
    EngineState.STOPPED: "Engine stopped",
    EngineState.STARTING: "Starting engine…",
    EngineState.NO_MODEL: "No model loaded",
    EngineState.LOADING: "Loading model…",
    EngineState.IDLE: "Ready",
    EngineState.GENERATING: "Generating…",
    EngineState.CRASHED: "Engine crashed",
}


def display_name(path: str | Path) -> str:
    return STARTER_LABEL if is_starter_model(path) else Path(path).name


def local_files(mime: QMimeData) -> list[Path]:
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]


class MainWindow(QMainWindow):
    def __init__(
        self,
        bridge: EngineBridge,
        *,
        pages: list[PageSpec] | None = None,
        machine: MachineState | None = None,
        remembered: RememberedSettings | None = None,
        preferences_file: Path | None = None,
    ):
        super().__init__()
        self.bridge = bridge
        self.machine = machine or MachineState(parent=self)
        self._preferences_file = preferences_file
        self.preferences = load_preferences(preferences_file)
        self.opener = ModelOpener(bridge, self.machine, remembered or RememberedSettings(), self,
                                  preferences=lambda: self.preferences)  # fmt: skip
        self.opener.unusable.connect(self._on_unusable_file)
        self.opener.decided.connect(self._on_decided)
        self.setWindowTitle("Hearth")
        self.setAcceptDrops(True)
        # Small enough for a 1366 x 768 screen at 1.5x; the pages scroll or fold below it.
        self.setMinimumSize(720, 480)
        self._last_folder = str(Path.home())
        self._fallback: tuple[Path, Path] | None = None  # (asked for, loaded if it is refused)

        self.navigation = QListWidget()
        self.navigation.setObjectName("navigation")
        self.navigation.setAccessibleName("Pages")
        self.navigation.currentRowChanged.connect(self._on_navigation)
        sidebar = QWidget()
        sidebar.setObjectName("sidebar")
        sidebar.setFixedWidth(176)
        sidebar_layout = QVBoxLayout(sidebar)
        sidebar_layout.setContentsMargins(0, 0, 0, 0)
        sidebar_layout.setSpacing(0)
        title = QLabel("Hearth")
        title.setObjectName("appTitle")
        sidebar_layout.addWidget(title)
        sidebar_layout.addWidget(self.navigation, 1)
        self.version_label = QLabel(f"Version {hearth_version()}")
        self.version_label.setObjectName("appVersion")
        sidebar_layout.addWidget(self.version_label)
        self.pages = QStackedWidget()
        self._page_names: list[str] = []

        # Two banners: a crash report with its Reload button must survive a refused drop.
        self.engine_banner = b.Banner()
        self.engine_banner.setObjectName("engineBanner")
        self.file_banner = b.Banner()
        self.file_banner.setObjectName("fileBanner")

        content = QWidget()
        content_layout = QVBoxLayout(content)
        content_layout.setContentsMargins(0, 0, 0, 0)
        content_layout.setSpacing(0)
        content_layout.addWidget(self.engine_banner)
        content_layout.addWidget(self.file_banner)
        content_layout.addWidget(self.pages, 1)
        central = QWidget()
        central_layout = QHBoxLayout(central)
        central_layout.setContentsMargins(0, 0, 0, 0)
        central_layout.setSpacing(0)
        central_layout.addWidget(sidebar)
        central_layout.addWidget(content, 1)
        self.setCentralWidget(central)

        for spec in pages if pages is not None else default_pages():
            self.add_page(spec.name, self._create_page(spec))
        self.chat_view: ChatView = self.page(CHAT)  # type: ignore[assignment]
        self.navigation.setCurrentRow(0)

        self._build_menus()
        self._build_status_bar()
        bridge.model_loaded.connect(self._on_model_loaded)
        bridge.load_failed.connect(self._on_load_failed)
        bridge.engine_crashed.connect(self._on_engine_crashed)
        bridge.state_changed.connect(self._on_state_changed)
        self._on_state_changed(bridge.state)

    # -- pages ----------------------------------------------------------------------------------

    def add_page(self, name: str, widget: QWidget) -> None:
        if name in self._page_names:
            raise ValueError(f"a page named {name!r} is already in the window")
        widget.setObjectName(widget.objectName() or f"page{name}")
        self._page_names.append(name)
        self.pages.addWidget(widget)
        self.navigation.addItem(name)

    def page(self, name: str) -> QWidget:
        return self.pages.widget(self._page_names.index(name))

    def page_names(self) -> list[str]:
        return list(self._page_names)

    def show_page(self, name: str) -> None:
        self.navigation.setCurrentRow(self._page_names.index(name))

    def current_page_name(self) -> str:
        return self._page_names[self.pages.currentIndex()]

    def _create_page(self, spec: PageSpec) -> QWidget:
        try:
            return spec.create(self)
        except Exception as exc:
            if spec.name == CHAT:
                raise  # the window is useless without its chat
            return placeholder_page(spec.name, f"This page failed to open: {exc}")

    def _on_navigation(self, row: int) -> None:
        if row >= 0:
            self.pages.setCurrentIndex(row)
            # Pages build parts of themselves late (the Model page's panel, banners' buttons):
            # Tab is put in layout order each time a page is shown.
            order_window_tabs(self.pages)

    # -- menus and status bar -------------------------------------------------------------------

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_action = QAction("&Open model…", self)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_action.triggered.connect(self.open_model_dialog)
        file_menu.addAction(self.open_action)
        file_menu.addSeparator()
        transfer = self.chat_view.transfer  # chats in and out: app/chat/transfer.py
        file_menu.addAction("&Import chats…", transfer.import_dialog)
        file_menu.addAction("&Export this chat…", self.chat_view.export_current_chat)
        file_menu.addAction("Export &all chats…", lambda: transfer.export_dialog())
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)

        edit_menu = self.menuBar().addMenu("&Edit")
        self.preferences_action = QAction("&Preferences…", self)
        self.preferences_action.setShortcut(QKeySequence("Ctrl+,"))  # Cmd+, on macOS
        self.preferences_action.setMenuRole(QAction.MenuRole.PreferencesRole)
        self.preferences_action.triggered.connect(self.open_preferences)
        edit_menu.addAction(self.preferences_action)

        help_menu = self.menuBar().addMenu("&Help")
        for title, path in doc_links():
            action = QAction(title, self)
            action.triggered.connect(
                lambda *_, p=path: QDesktopServices.openUrl(QUrl.fromLocalFile(str(p)))
            )
            help_menu.addAction(action)
        help_menu.addSeparator()
        about = QAction("&About Hearth", self)
        about.setMenuRole(QAction.MenuRole.AboutRole)
        about.triggered.connect(lambda: QMessageBox.about(self, "About Hearth", about_text()))
        help_menu.addAction(about)

    def open_preferences(self) -> None:
        dialog = PreferencesDialog(self.preferences, self)
        if dialog.exec() == PreferencesDialog.DialogCode.Accepted:
            self.apply_preferences(dialog.preferences())

    def apply_preferences(self, preferences: Preferences) -> None:
        """Keep `preferences` and apply the look at once (threads and context apply from the
        next load, the server from the next start)."""
        save_preferences(preferences, self._preferences_file)
        look = (self.preferences.theme, self.preferences.text_size)
        self.preferences = preferences
        app = QApplication.instance()
        if app is not None and look != (preferences.theme, preferences.text_size):
            apply_theme(app, preferences.theme, preferences.text_size)

    def _build_status_bar(self) -> None:
        self.model_label = QLabel("No model")
        self.model_label.setObjectName("modelLabel")
        self.model_label.setTextFormat(Qt.TextFormat.RichText)
        self.model_label.linkActivated.connect(lambda _link: self.show_page(LIBRARY))
        self.context_label = QLabel()
        self.context_label.setObjectName("contextLabel")
        self.placement_label = QLabel()  # where the model runs, and whether flash attention is on
        self.placement_label.setObjectName("placementLabel")
        self.state_label = QLabel()
        self.state_label.setObjectName("engineStateLabel")
        bar = self.statusBar()
        bar.addWidget(self.model_label, 1)
        bar.addPermanentWidget(self.placement_label)
        bar.addPermanentWidget(self.context_label)
        bar.addPermanentWidget(self.state_label)

    # -- opening models -------------------------------------------------------------------------

    def open_model_dialog(self) -> None:
        path = self.ask_for_model_file()
        if path:
            self.open_model_file(path)

    def ask_for_model_file(self) -> str:
        """The Open dialog, sized so that its columns (name, size, date) are not cut off, in the
        folder of the last model opened (never the starter's, inside Python's packages)."""
        dialog = QFileDialog(self, "Open model", self._last_folder)
        dialog.setNameFilters(["GGUF models (*.gguf)", "All files (*)"])
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.resize(min(960, self.width()), min(600, self.height()))
        if dialog.exec() != QFileDialog.DialogCode.Accepted or not dialog.selectedFiles():
            return ""
        return dialog.selectedFiles()[0]

    def open_model_file(self, path: str | Path, *, fallback: str | Path | None = None) -> bool:
        """Check `path` and, if it is a readable GGUF, load it in place of the current model as
        the load policy plans it (once the machine is known). False if the file is unusable.

        `fallback` (the starter model, for `--model`): loaded instead when `path` is unusable or
        fits nowhere, with the reason left on screen."""
        path = Path(path)
        self._fallback = (path, Path(fallback)) if fallback is not None else None
        # Cleared before the opener runs: with the machine known it decides at once, and its
        # refusal (banner, status bar) must be what stays on screen.
        self.file_banner.hide()
        self._show_loading(path, planning=self.machine.snapshot is None)
        if not self.opener.open(path):
            return False
        if not is_starter_model(path):
            self._last_folder = str(path.parent)
        return True

    def load_model(self, path: str | Path) -> bool:
        """The same as open_model_file (the starter model takes the same road)."""
        return self.open_model_file(path)

    def _take_fallback(self, refused: Path) -> Path | None:
        """The file to load instead of `refused`, if its opening named one (once)."""
        if self._fallback is None or self._fallback[0] != refused:
            return None
        fallback = self._fallback[1]
        self._fallback = None
        return fallback

    def _load_fallback(self, fallback: Path) -> None:
        """Load `fallback` leaving the banner that says why the file asked for is not loaded."""
        self._show_loading(fallback, planning=self.machine.snapshot is None)
        self.opener.open(fallback)

    def _on_unusable_file(self, path: Path, message: str) -> None:
        current = self.bridge.model
        fallback = self._take_fallback(path)
        if fallback is not None:
            keep = f"{display_name(fallback)} is loaded instead."
        elif current is not None:
            keep = f"{display_name(current.path)} stays loaded."
        else:
            keep = "Open a .gguf model file with File › Open model… or drag one here."
        self.file_banner.show_message(b.ERROR, f"Can't open {path.name}", f"{message} {keep}")
        self._restore_model_label()
        if fallback is not None:
            self._load_fallback(fallback)

    def _on_decided(self, decision: LoadDecision) -> None:
        if decision.fits:
            self.engine_banner.hide()
            self._show_loading(decision.path)
            if decision.notes:
                self.file_banner.show_message(
                    b.INFO, f"{display_name(decision.path)}: your settings no longer fit",
                    " ".join(decision.notes),
                    actions=[("Model settings", lambda: self.show_page(MODEL))],
                )  # fmt: skip
            return
        actions = [
            (f"Load {option.path.name}", lambda *_, o=option: self.open_model_file(o.path))
            for option in decision.options
        ]
        actions.append(("Model settings", lambda: self.show_page(MODEL)))
        current = self.bridge.model
        fallback = self._take_fallback(decision.path)
        if fallback is not None:
            stays = f" {display_name(fallback)} is loaded instead."
        elif current is not None:
            stays = f" {display_name(current.path)} stays loaded."
        else:
            stays = ""
        self.file_banner.show_message(
            b.ERROR,
            f"{display_name(decision.path)} does not fit on this computer",
            decision.refusal() + stays,
            actions=actions,
        )
        self._restore_model_label()
        if fallback is not None:
            self._load_fallback(fallback)

    def _restore_model_label(self) -> None:
        loaded = self.bridge.model
        loading = self.bridge.loading_params
        if loaded is not None:
            self._on_model_loaded(loaded)
        elif self.bridge.state == EngineState.LOADING and loading is not None:
            self._show_loading(Path(loading.path))  # the load that is really under way
        else:
            self.model_label.setText("No model loaded")

    def explain_no_model(self) -> None:
        self.file_banner.show_message(
            b.INFO,
            "No model yet",
            "Open a .gguf model with File › Open model… or drag one onto the window.",
        )

    def _show_loading(self, path: Path, *, planning: bool = False) -> None:
        what = "Looking at your hardware for" if planning else "Loading"
        self.model_label.setText(f"{what} {rich_escape(display_name(path))}…")
        self.context_label.clear()
        self.placement_label.clear()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        # Any local file is accepted here so that a wrong one gets an explanation on drop,
        # rather than a silent "no entry" cursor.
        if local_files(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        self.dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        if self.handle_drop(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def handle_drop(self, mime: QMimeData) -> bool:
        files = local_files(mime)
        if not files:
            return False
        # Several files: open the first model among them; the rest are ignored.
        ggufs = [f for f in files if f.suffix.lower() == ".gguf"]
        self.open_model_file(ggufs[0] if ggufs else files[0])
        return True

    # -- engine events --------------------------------------------------------------------------

    def _on_model_loaded(self, loaded: p.ModelLoaded) -> None:
        self.engine_banner.hide()
        name = display_name(loaded.path)
        starter = is_starter_model(loaded.path)
        if starter:
            link = "<a href='library'>Find real models in the Library</a>"
            self.model_label.setText(f"{rich_escape(STARTER_LABEL)} · {link}")
            self.chat_view.notice.show_message(
                b.INFO,
                "You are chatting with a tiny demo model",
                STARTER_NOTE,
                actions=[("Open Library", lambda: self.show_page(LIBRARY))],
            )
        else:
            self.model_label.setText(rich_escape(name))
            if not self.chat_view.show_template_notice(loaded):
                self.chat_view.notice.hide()
        self.model_label.setToolTip(plain_tooltip(loaded.path, loaded.description))
        self.context_label.setText(context_text(loaded))
        self.placement_label.setText(placement_text(loaded))
        self.placement_label.setToolTip("\n".join((*loaded.runs_on, loaded.engine_note)).strip())
        self.chat_view.assistant_name = (
            STARTER_LABEL.split(" (")[0] if starter else printable_line(Path(loaded.path).stem)
        )
        self.setWindowTitle(f"{printable_line(name)} — Hearth")

    def _on_load_failed(self, failed: p.LoadFailed) -> None:
        self.placement_label.clear()
        self.model_label.setText("No model loaded")
        self.context_label.clear()
        self.setWindowTitle("Hearth")  # the model before was unloaded to make room
        actions = [("Open another model…", self.open_model_dialog)]
        previous = self.bridge.reload_params()
        if previous is not None and Path(previous.path) != Path(failed.path):
            actions.insert(
                0,
                (
                    f"Load {display_name(previous.path)} again",
                    lambda: self.open_model_file(previous.path),
                ),
            )
        self.engine_banner.show_message(
            b.ERROR,
            f"Could not load {display_name(failed.path)}",
            failed.message,
            # llama.cpp's own words about the load, else the engine's last lines
            details=failed.details or self.bridge.engine_last_lines() or ("(it printed nothing)",),
            details_label="Show what llama.cpp said",
            actions=actions,
        )

    def _on_engine_crashed(self, crash: EngineCrashed) -> None:
        # Nothing in the status bar may still describe the model that is gone, nor a banner say
        # that it "stays loaded".
        self.file_banner.hide()
        self.model_label.setText("No model loaded")
        self.model_label.setToolTip("")
        self.context_label.clear()
        self.placement_label.clear()
        self.placement_label.setToolTip("")
        self.setWindowTitle("Hearth")
        self.chat_view.notice.hide()  # it was about the model that is gone
        if crash.lost_helpers and self.bridge.reload_params() is not None:
            # A helper machine went away: plan without it and load again at once; the reply
            # that was cut short is kept as it was, and the banner says what happened.
            self.machine.drop_helpers(crash.lost_helpers)
            self.reload_engine()
            self.engine_banner.show_message(
                b.INFO,
                "A helper machine went away",
                f"{crash.message} Loading the model again without it.",
                details=crash.last_lines,
            )
            return
        snapshot = self.machine.snapshot
        text = crash.message_for(gpu=snapshot is None or snapshot.has_usable_gpu)
        culprit = self.bridge.crashed_while_loading
        reload_params = self.bridge.reload_params()
        if culprit is not None:
            text += f" It happened while loading {display_name(culprit.path)}."
            if reload_params is not None and reload_params != culprit:
                text += f" Reload loads {display_name(reload_params.path)} instead."
        self.engine_banner.show_message(
            b.ERROR,
            "The engine stopped unexpectedly",
            text,
            # llama.cpp's own error lines first: a backtrace after them fills the tail
            details=(
                report_lines(crash.cause_lines, crash.last_lines)
                if crash.cause_lines
                else crash.last_lines
            )
            or ("(the engine printed nothing)",),
            details_label="Show the engine's last lines",
            actions=[("Reload model" if reload_params else "Restart engine", self.reload_engine)],
        )

    def reload_engine(self) -> None:
        """A fresh worker, and the model again as the load policy plans it now (memory may have
        changed since it was loaded)."""
        self.engine_banner.hide()
        params = self.bridge.reload_params()
        self.bridge.restart()
        if params is not None:
            self.open_model_file(params.path)

    def _on_state_changed(self, state: str) -> None:
        self.state_label.setText(STATE_TEXT.get(state, state))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            # The status bar's link was coloured with the palette before: lay it out again.
            text = self.model_label.text()
            self.model_label.clear()
            self.model_label.setText(text)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.bridge.shutdown()
        super().closeEvent(event)


def context_text(loaded: p.ModelLoaded) -> str:
    """ "Context 8,192 tokens · KV f16": what the loaded model really has."""
    kv = loaded.type_k if loaded.type_k == loaded.type_v else f"{loaded.type_k}/{loaded.type_v}"
    return f"Context {loaded.n_ctx:,} tokens · KV {kv}"


def placement_text(loaded: p.ModelLoaded) -> str:
    """ "CUDA0 · 32/32 layers · flash attention on": where the model runs, from llama.cpp's own
    buffers, so a GPU build that fell back to the CPU is visible at a glance."""
    devices = [name.split(":", 1)[0] for name in loaded.runs_on] or ["CPU"]
    if loaded.engine == Engine.HEARTH:
        # llama.cpp holds only the vocabulary here: its buffers do not say where the model runs
        # (the description does), and the engine has its own attention
        return Engine.HEARTH.display_name
    parts = [" + ".join(devices)]
    if loaded.n_gpu_layers:
        parts.append(f"{loaded.n_gpu_layers}/{loaded.n_layers} layers on the GPU")
    parts.append(f"flash attention {loaded.flash_attn}")
    # A model that asked for the Hearth engine and fell back says so (the tooltip says why).
    llama = Engine.LLAMA.display_name
    parts.append(f"{llama} (Hearth engine unavailable)" if loaded.engine_note else llama)
    return " · ".join(parts)
