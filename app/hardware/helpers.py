"""The Hardware page's helper machines: other computers lending their GPU (or CPU) through
llama.cpp's RPC backend (`hearth host` there), added by address, shown beside the local devices
with their free memory and the measured link.

Adding one asks it at once, off the GUI thread (engine/hardware/remote.py: version, devices,
link test); only a helper that answers is remembered (engine/hardware/remote_store.py), and the
window's machine snapshot is taken again so that plans can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout

from app.common.accessibility import named
from app.common.background import TaskRunner
from engine.hardware.remote import RemoteHost, RemoteHostError, probe_remote
from engine.hardware.remote_store import (
    device_phrase,
    link_phrase,
    load_helpers,
    save_helpers,
)

HOW_TO = (
    "Another computer can lend its GPU: run <code>hearth host --listen ADDR</code> there and add "
    "its address here. The link carries no password or encryption: use it on a network you "
    "trust, through WireGuard or an SSH tunnel (docs/multi-machine.md)."
)


def _label(text: str = "", name: str | None = None) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)  # a helper's answers are not markup
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if name:
        label.setObjectName(name)
    return label


class HelperCard(QFrame):
    """One helper: its address, protocol and link, a line per device, and Remove."""

    remove_requested = Signal(str)

    def __init__(self, host: RemoteHost):
        super().__init__()
        self.setObjectName("hwCard")
        self.host = host
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        top = QHBoxLayout()
        top.addWidget(_label(f"Helper {host.address}", "hwCardTitle"), 1)
        remove = QPushButton("Remove")
        remove.clicked.connect(lambda: self.remove_requested.emit(host.address))
        top.addWidget(remove)
        layout.addLayout(top)
        self.link = _label(
            f"{link_phrase(host)} · llama.cpp RPC protocol "
            + ".".join(map(str, host.protocol_version)),
            "hwMuted",
        )
        layout.addWidget(self.link)
        self.devices = [
            _label(f"{device.name} ({device.backend}): {device_phrase(host, i)}")
            for i, device in enumerate(host.devices)
        ]
        for label in self.devices:
            layout.addWidget(label)
        for note in host.notes:
            layout.addWidget(_label(f"• {note}", "hwNote"))


class HelpersSection(QFrame):
    """Add a helper by address; a card per helper; why a remembered one did not answer."""

    helpers_changed = Signal()  # the remembered list changed: take the machine snapshot again

    def __init__(self, probe_fn: Callable[[str], RemoteHost] = probe_remote):
        super().__init__()
        self._probe_fn = probe_fn
        self._tasks = TaskRunner(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 0)
        heading = QLabel("<b>Helper machines</b> — " + HOW_TO)
        heading.setWordWrap(True)
        layout.addWidget(heading)
        row = QHBoxLayout()
        self.address = named(QLineEdit(), "Helper machine address")
        self.address.setPlaceholderText("address of a computer running hearth host, e.g. 10.0.0.2")
        self.address.returnPressed.connect(self.add)
        row.addWidget(self.address, 1)
        self.add_button = QPushButton("Add helper")
        self.add_button.clicked.connect(self.add)
        row.addWidget(self.add_button)
        layout.addLayout(row)
        self.status = _label("", "hwMuted")
        layout.addWidget(self.status)
        self.cards_layout = QVBoxLayout()
        layout.addLayout(self.cards_layout)
        self.cards: dict[str, HelperCard] = {}
        self.problems: list[QLabel] = []

    def add(self) -> None:
        address = self.address.text().strip()
        if not address or self._tasks.busy:
            return
        self.add_button.setEnabled(False)
        self.status.setObjectName("hwMuted")
        self.status.setText(f"Asking {address} (devices, memory, a link test)…")
        self._tasks.run(lambda: self._probe_fn(address), lambda result: self._added(result))

    def _added(self, result: RemoteHost | Exception) -> None:
        self.add_button.setEnabled(True)
        if isinstance(result, Exception):
            why = str(result) if isinstance(result, RemoteHostError) else repr(result)
            self.status.setObjectName("hwUnusable")
            self.status.setText(why)
            self._repolish(self.status)
            return
        save_helpers([*load_helpers(), result.address])
        self.address.clear()
        self.status.setText(f"Added {result.address}; plans may now place layers on it.")
        self.show_helpers([*self._hosts(), result], ())
        self.helpers_changed.emit()

    def remove(self, address: str) -> None:
        save_helpers([a for a in load_helpers() if a != address])
        self.show_helpers([h for h in self._hosts() if h.address != address], ())
        self.status.setText(f"Removed {address}.")
        self.helpers_changed.emit()

    def show_helpers(self, hosts: Sequence[RemoteHost], problems: Sequence[str]) -> None:
        for widget in [*self.cards.values(), *self.problems]:
            self.cards_layout.removeWidget(widget)
            widget.deleteLater()
        self.cards = {}
        for host in hosts:
            card = HelperCard(host)
            card.remove_requested.connect(self.remove)
            self.cards[host.address] = card
            self.cards_layout.addWidget(card)
        self.problems = [_label(f"✗ {problem}", "hwUnusable") for problem in problems]
        for label in self.problems:
            self.cards_layout.addWidget(label)

    def _hosts(self) -> list[RemoteHost]:
        return [card.host for card in self.cards.values()]

    @staticmethod
    def _repolish(widget) -> None:
        widget.style().unpolish(widget)
        widget.style().polish(widget)
