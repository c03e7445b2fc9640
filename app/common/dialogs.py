"""What every dialog of the app shares: its answer buttons, wired the same way."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox


def answer_buttons(dialog: QDialog, accept: QDialogButtonBox.StandardButton) -> QDialogButtonBox:
    """`accept` (Ok, Save...) and Cancel, wired to the dialog's accept() and reject()."""
    buttons = QDialogButtonBox(accept | QDialogButtonBox.StandardButton.Cancel)
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    return buttons
