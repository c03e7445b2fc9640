"""The Preferences dialog (Edit › Preferences…) and the Help menu's About box.

What is set here is stored through engine.session.preferences; the look applies at once, the
engine's threads and the default context from the next load (the dialog says so), and the API
server with the next start of the app.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.common.dialogs import answer_buttons
from engine.cli import hearth_version
from engine.planner.fill_gpu import margin_text
from engine.session.preferences import (
    CONTEXTS,
    MAX_THREADS,
    TEXT_SIZES,
    THEMES,
    Preferences,
    cpu_threads_available,
)

FILL_GPU_TEXT = (
    "A model loading without settings of its own fills the GPU with context, up to its "
    f"training context, every layer on the GPU, leaving the safety margin free ({margin_text()}: "
    "about twice the planner's largest measured miss). Settings you chose on the Model page "
    "still win."
)
SOURCE = Path(__file__).resolve().parents[2]  # a clone: README.md and docs/ beside app/


def doc_links(source: Path = SOURCE) -> list[tuple[str, Path]]:
    """(title, file) of the guides that exist here: a clone has them, a packaged app may not."""
    wanted = [
        ("Getting started (README)", source / "README.md"),
        ("Chat and settings", source / "docs" / "chat-and-settings.md"),
        ("The library", source / "docs" / "library.md"),
        ("The API server", source / "docs" / "server.md"),
        ("All documentation", source / "docs"),
    ]
    return [(title, path) for title, path in wanted if path.exists()]


def about_text(source: Path = SOURCE) -> str:
    links = " · ".join(
        f"<a href='{path.as_uri()}'>{title}</a>" for title, path in doc_links(source)
    )
    return (
        f"<h3>Hearth {hearth_version()}</h3>"
        "<p>Chat with quantized GGUF models on your own computer: Hearth plans how a model fits "
        "your memory, runs it in its own engine process, and serves it to other programs on "
        "request.</p>"
        + (f"<p>{links}</p>" if links else "<p>The guides are in docs/ of Hearth's source.</p>")
    )


class PreferencesDialog(QDialog):
    def __init__(self, preferences: Preferences, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        self.theme_box = QComboBox()
        for theme in THEMES:
            self.theme_box.addItem("Like the system" if theme == "system" else theme.title(), theme)
        self.text_size_box = QComboBox()
        for size in TEXT_SIZES:
            self.text_size_box.addItem("The system's" if size == 0 else f"{size} pt", size)
        self.threads_box = QSpinBox()
        self.threads_box.setRange(0, MAX_THREADS)
        self.threads_box.setSpecialValueText("Automatic")
        self.threads_box.setToolTip(
            f"CPU threads the engine computes with (this computer has {cpu_threads_available()} "
            "logical CPUs). Automatic: a prompt on every physical core, a reply on all of them "
            "but one, which is left to the window. Applies from the next load."
        )
        self.context_box = QComboBox()
        for n in CONTEXTS:
            self.context_box.addItem(
                "8,192 tokens (Hearth's choice)" if n == 0 else f"{n:,} tokens", n
            )
        self.context_box.setToolTip(
            "The context a model aims at when it loads without settings of its own (the Model "
            "page's are kept per model). Less is used where this much does not fit."
        )
        self.fill_box = QCheckBox("Use all of my GPU")
        self.fill_box.setAccessibleName("Use all of my GPU")
        self.fill_box.setToolTip(FILL_GPU_TEXT)
        self.fill_note = QLabel(FILL_GPU_TEXT)
        self.fill_note.setObjectName("fillGpuNote")
        self.fill_note.setWordWrap(True)
        self.server_box = QCheckBox("Start the API server when a model has loaded")
        form = QFormLayout()
        form.addRow("&Theme", self.theme_box)
        form.addRow("Text &size", self.text_size_box)
        form.addRow("CPU &threads", self.threads_box)
        form.addRow("Default &context", self.context_box)
        form.addRow("", self.fill_box)
        form.addRow("", self.fill_note)
        form.addRow("API server", self.server_box)
        self.server_box.setAccessibleName("Start the API server when a model has loaded")
        note = QLabel("The look changes at once; threads and context apply from the next load.")
        note.setWordWrap(True)
        buttons = answer_buttons(self, QDialogButtonBox.StandardButton.Ok)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.show_preferences(preferences)

    def show_preferences(self, preferences: Preferences) -> None:
        for box, value in (
            (self.theme_box, preferences.theme),
            (self.text_size_box, preferences.text_size),
            (self.context_box, preferences.default_context),
        ):
            box.setCurrentIndex(max(0, box.findData(value)))
        self.threads_box.setValue(preferences.n_threads)
        self.server_box.setChecked(preferences.start_server)
        self.fill_box.setChecked(preferences.fill_gpu)

    def preferences(self) -> Preferences:
        return Preferences(
            theme=self.theme_box.currentData(),
            text_size=self.text_size_box.currentData(),
            n_threads=self.threads_box.value(),
            default_context=self.context_box.currentData(),
            start_server=self.server_box.isChecked(),
            fill_gpu=self.fill_box.isChecked(),
        )
