"""The Hardware page's helper machines (app/hardware/helpers.py), over an injected probe."""

from __future__ import annotations

import pytest

from app.hardware.helpers import HelpersSection
from engine.hardware.remote import RemoteDevice, RemoteHost, RemoteHostError, RemoteLink
from engine.hardware.remote_store import load_helpers

GIB = 1024**3
WAIT_MS = 5_000


def pc2(address: str = "10.0.0.2:50052") -> RemoteHost:
    return RemoteHost(
        address=address,
        protocol_version=(7, 0, 0),
        devices=(RemoteDevice(address, 0, "CUDA0", "RTX 3090", "cuda", 20 * GIB, 24 * GIB),),
        link=RemoteLink(latency_s=0.0004, bytes_per_s=2.5e9 / 8),
    )


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))


def probe(address: str) -> RemoteHost:
    if address.startswith("10.0.0.9"):
        raise RemoteHostError(f"The helper at {address} cannot be reached: refused.")
    return pc2(address if ":" in address else f"{address}:50052")


def test_adding_a_helper_shows_its_devices_and_link_and_remembers_it(qtbot):
    section = HelpersSection(probe_fn=probe)
    qtbot.addWidget(section)
    section.address.setText("10.0.0.2")
    with qtbot.waitSignal(section.helpers_changed, timeout=WAIT_MS):
        section.add_button.click()
    card = section.cards["10.0.0.2:50052"]
    assert "2.50 Gbit/s" in card.link.text() and "0.40 ms" in card.link.text()
    assert card.devices[0].text() == "CUDA0 (cuda): 20.0 GiB free of 24.0 GiB"
    assert load_helpers() == ["10.0.0.2:50052"]
    assert section.address.text() == ""


def test_a_helper_that_does_not_answer_says_why_and_is_not_remembered(qtbot):
    section = HelpersSection(probe_fn=probe)
    qtbot.addWidget(section)
    section.address.setText("10.0.0.9")
    section.add_button.click()
    qtbot.waitUntil(lambda: "cannot be reached" in section.status.text(), timeout=WAIT_MS)
    assert section.cards == {}
    assert load_helpers() == []
    assert section.add_button.isEnabled()


def test_removing_a_helper_forgets_it(qtbot):
    section = HelpersSection(probe_fn=probe)
    qtbot.addWidget(section)
    section.address.setText("10.0.0.2")
    with qtbot.waitSignal(section.helpers_changed, timeout=WAIT_MS):
        section.add_button.click()
    with qtbot.waitSignal(section.helpers_changed, timeout=WAIT_MS):
        section.cards["10.0.0.2:50052"].remove_requested.emit("10.0.0.2:50052")
    assert section.cards == {}
    assert load_helpers() == []


def test_remembered_helpers_that_did_not_answer_are_listed_with_the_reason(qtbot):
    section = HelpersSection(probe_fn=probe)
    qtbot.addWidget(section)
    section.show_helpers([pc2()], ["The helper at 10.0.0.3:50052 cannot be reached: refused."])
    assert list(section.cards) == ["10.0.0.2:50052"]
    assert "10.0.0.3" in section.problems[0].text()


def test_the_hardware_page_with_a_helper_as_the_person_sees_it(qtbot, tmp_path):
    """docs/screenshots/hardware-helpers.png (written with HEARTH_SCREENSHOTS=1)."""
    import os
    from pathlib import Path

    from PySide6.QtWidgets import QApplication

    from app.common.theme import apply_theme
    from tests.app.hardware.test_panel import make_panel

    apply_theme(QApplication.instance())
    panel = make_panel(qtbot)
    qtbot.waitUntil(lambda: bool(panel.detection and panel.cards), timeout=WAIT_MS)
    there = pc2()
    pc3 = "The helper at 10.0.0.3:50052 runs llama.cpp RPC protocol 6.1.0; this Hearth's engine "
    pc3 += "speaks 7.0.0. Install the same Hearth version on both machines."
    panel.helpers.show_helpers([there], [pc3])
    panel.resize(900, 900)
    qtbot.wait(50)
    assert "CUDA0 (cuda)" in panel.helpers.cards[there.address].devices[0].text()
    on = os.environ.get("HEARTH_SCREENSHOTS") == "1"
    shots = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
    target = shots / "hardware-helpers.png" if on else tmp_path / "hardware-helpers.png"
    assert panel.grab().save(str(target))
