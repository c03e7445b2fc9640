"""The Library page against the fake Hub: search, fit badges, downloads with pause and resume,
local models (load, delete, import, drop), offline mode, and its place in the main window."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from app.common.background import QueueBridge
from app.library.panel import LibraryPanel
from app.library.suggestions import NO_CONNECTION
from app.shell.main_window import MainWindow
from app.shell.pages import LIBRARY, default_pages
from engine.hub.client import HubClient
from engine.hub.download import RetryPolicy, part_path
from engine.hub.library import Library
from engine.hub.queue import DONE, FAILED, PAUSED, DownloadQueue
from engine.hub.settings import HubSettings
from engine.hub.suggestions import CatalogueEntry
from engine.planner import DeviceBudget, PlanRequest
from engine.starter_model import STARTER_FILE
from tests.app.conftest import client_of, open_in_window
from tests.app.fake_engine import model_loaded
from tests.engine.gguf.craft import valid_model
from tests.engine.hub.fake_hub import Cut, FakeHub

pytestmark = pytest.mark.timeout(60)
WAIT_MS = 10_000
GGUF = valid_model().bytes()
REPO = "org/tiny-GGUF"
BIG_CARD = PlanRequest(
    gpus=(DeviceBudget("0", "card", "cuda", 8 << 30),), host_budget_bytes=8 << 30
)
TINY_CARD = PlanRequest(gpus=(DeviceBudget("0", "card", "cuda", 1 << 20),), host_budget_bytes=1)
STUCK = RetryPolicy(attempts=3, first_delay_s=30.0)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    hub = FakeHub()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    hub.add_repo(
        REPO,
        {
            "tiny-Q8_0.gguf": GGUF,
            "tiny-F16-00001-of-00002.gguf": GGUF,
            "tiny-F16-00002-of-00002.gguf": GGUF,
        },
        downloads=10,
        license="mit",
    )
    hub.add_repo("org/other-GGUF", {"o-Q4_0.gguf": GGUF}, downloads=5)
    try:
        yield hub
    finally:
        hub.close()


def make_panel(
    qtbot, tmp_path: Path, *, offline=False, request=BIG_CARD, policy=None, catalogue=list
):
    settings = HubSettings(models_dir=tmp_path / "models", offline=offline)
    bridge = QueueBridge()
    queue = DownloadQueue(
        settings.models_dir,
        token=False,
        policy=policy or RetryPolicy(attempts=2, first_delay_s=0.01),
        on_change=bridge.job_changed.emit,
        on_done=bridge.job_done.emit,
        downloader_options={"reserve_bytes": 0},
    )
    loaded: list[Path] = []
    panel = LibraryPanel(
        settings=settings,
        library=Library(settings.models_dir, scan_hf_cache=False),
        queue=queue,
        bridge=bridge,
        client_factory=lambda: HubClient(token=False),
        plan_request=lambda: request,
        load_model=loaded.append,
        catalogue=catalogue,
    )
    bridge.setParent(panel)
    qtbot.addWidget(panel)
    panel.loaded = loaded
    queue.start()
    panel.destroyed.connect(lambda *_: queue.shutdown(timeout=1.0))
    qtbot.waitUntil(lambda: not panel.runner.busy, timeout=WAIT_MS)
    return panel


def search_and_open(qtbot, panel: LibraryPanel, text: str = "tiny") -> None:
    panel.search_box.setText(text)
    qtbot.mouseClick(panel.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.results.count() > 0, timeout=WAIT_MS)
    panel.results.setCurrentRow(0)
    qtbot.waitUntil(
        lambda: bool(panel.file_items()) and all(i.text(2) != "…" for i in panel.file_items()),
        timeout=WAIT_MS,
    )


def select_file(panel: LibraryPanel, name: str) -> None:
    [item] = [i for i in panel.file_items() if i.text(0) == name]
    panel.files.setCurrentItem(item)


def test_search_lists_files_by_quant_with_fit_badges(qtbot, hub, tmp_path) -> None:
    panel = make_panel(qtbot, tmp_path)
    search_and_open(qtbot, panel)
    assert panel.results.count() == 1 and "10 downloads" in panel.results.item(0).text()
    assert "license: mit" in panel.repo_label.text()
    groups = [panel.files.topLevelItem(i).text(0) for i in range(panel.files.topLevelItemCount())]
    assert groups == ["F16", "Q8_0"]
    badges = {i.text(0): (i.text(1), i.text(2)) for i in panel.file_items()}
    assert badges["tiny-F16.gguf (2 parts)"][1] == "Fits"
    assert badges["tiny-Q8_0.gguf"][1] == "Fits"
    assert "All on the GPU" in panel.file_items()[0].toolTip(2)
    # nothing was downloaded to decide: only header ranges were read
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").rglob("*.gguf"))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_search_without_a_connection_says_so_in_seconds(qtbot, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    panel = make_panel(qtbot, tmp_path)
    panel.search_box.setText("qwen")
    started = time.monotonic()
    qtbot.mouseClick(panel.search_button, Qt.MouseButton.LeftButton)
    assert panel.searching() and not panel.search_button.isEnabled()
    qtbot.waitUntil(lambda: not panel.error_banner.isHidden(), timeout=WAIT_MS)
    assert time.monotonic() - started < 5.0
    assert panel.error_banner.title() == "No connection to the Hugging Face Hub (127.0.0.1)"
    assert "Check your internet connection" in panel.error_banner.text()
    assert [button.text() for button in panel.error_banner.action_buttons()] == ["Search again"]
    assert not panel.searching() and panel.search_button.isEnabled()


def test_a_search_that_hangs_can_be_cancelled_and_times_out(qtbot, tmp_path, monkeypatch) -> None:
    with socket.socket() as silent:  # connects, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        panel = make_panel(qtbot, tmp_path)
        panel.search()
        assert panel.searching()
        qtbot.mouseClick(panel.cancel_search_button, Qt.MouseButton.LeftButton)
        assert not panel.searching() and panel.status_label.text() == "Search cancelled."
        qtbot.waitUntil(lambda: not panel.runner.busy, timeout=WAIT_MS)  # the late answer...
        assert panel.error_banner.isHidden()  # ...is dropped

        monkeypatch.setattr("app.library.panel.SEARCH_DEADLINE_MS", 300)  # should the client
        monkeypatch.setattr("engine.hub.client.SEARCH_TIMEOUT_S", 30.0)  # not give up itself
        panel.search()
        qtbot.waitUntil(lambda: not panel.error_banner.isHidden(), timeout=WAIT_MS)
        assert panel.error_banner.title().startswith("No connection")


def test_does_not_fit_badge(qtbot, hub, tmp_path) -> None:
    panel = make_panel(qtbot, tmp_path, request=TINY_CARD)
    search_and_open(qtbot, panel)
    assert {i.text(2) for i in panel.file_items()} == {"Does not fit"}


def test_download_then_load_and_delete(qtbot, hub, tmp_path, monkeypatch) -> None:
    panel = make_panel(qtbot, tmp_path)
    search_and_open(qtbot, panel)
    select_file(panel, "tiny-F16.gguf (2 parts)")
    qtbot.mouseClick(panel.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(panel.rows) and next(iter(panel.rows.values())).state == DONE,
                    timeout=WAIT_MS)  # fmt: skip
    row = next(iter(panel.rows.values()))
    assert row.bar.value() == 1000 and "verified" in row.status.text()
    qtbot.waitUntil(lambda: panel.local.topLevelItemCount() == 1, timeout=WAIT_MS)
    item = panel.local.topLevelItem(0)
    assert item.text(0) == "tiny-F16.gguf" and item.text(3) == REPO
    panel.local.setCurrentItem(item)
    qtbot.mouseClick(panel.findChild(type(panel.download_button), "loadButton"),
                     Qt.MouseButton.LeftButton)  # fmt: skip
    first = tmp_path / "models" / "org" / "tiny-GGUF" / "tiny-F16-00001-of-00002.gguf"
    assert panel.loaded == [first.resolve()]
    qtbot.wait(50)
    assert panel.local.topLevelItem(0).text(4) == "never"  # asked for, not loaded yet
    panel.local_view.remember_loaded(model_loaded(str(first)))  # the bridge's model_loaded
    qtbot.waitUntil(lambda: panel.local.topLevelItem(0).text(4) != "never", timeout=WAIT_MS)

    panel.local.setCurrentItem(panel.local.topLevelItem(0))
    panel.local_view.confirm = lambda text: "Delete tiny-F16.gguf" in text
    panel.local_view.delete_selected()
    qtbot.waitUntil(lambda: panel.local.topLevelItemCount() == 0, timeout=WAIT_MS)
    assert not first.exists()


def test_pause_and_resume_from_the_row(qtbot, hub, tmp_path) -> None:
    panel = make_panel(qtbot, tmp_path, policy=STUCK)
    search_and_open(qtbot, panel)
    hub.add_faults("tiny-Q8_0.gguf", Cut(300))  # after the fit badge's header reads
    select_file(panel, "tiny-Q8_0.gguf")
    panel.download_selected()
    qtbot.waitUntil(lambda: len(panel.rows) == 1, timeout=WAIT_MS)
    row = next(iter(panel.rows.values()))
    job = panel.queue.job(row.job_id)
    qtbot.waitUntil(lambda: job.received_bytes() == 300, timeout=WAIT_MS)
    qtbot.mouseClick(row.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: row.state == PAUSED, timeout=WAIT_MS)
    assert row.pause_button.text() == "Resume" and "Paused" in row.status.text()
    assert part_path(job.path).stat().st_size == 300
    panel.queue._policy = RetryPolicy(attempts=2, first_delay_s=0.01)
    qtbot.mouseClick(row.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: row.state == DONE, timeout=WAIT_MS)
    assert job.path.read_bytes() == GGUF


def test_offline_shows_local_models_only(qtbot, hub, tmp_path) -> None:
    local = tmp_path / "models" / "mine.gguf"
    local.parent.mkdir(parents=True)
    local.write_bytes(GGUF)
    panel = make_panel(qtbot, tmp_path, offline=True)
    qtbot.waitUntil(lambda: panel.local.topLevelItemCount() == 1, timeout=WAIT_MS)
    assert not panel.search_box.isEnabled() and not panel.download_button.isEnabled()
    assert "Offline" in panel.status_label.text()
    panel.search()
    assert panel.results.count() == 0 and not hub.requests


def test_import_by_drop_and_bad_files_say_why(qtbot, hub, tmp_path) -> None:
    panel = make_panel(qtbot, tmp_path)
    good, bad = tmp_path / "good.gguf", tmp_path / "bad.gguf"
    good.write_bytes(GGUF)
    bad.write_bytes(b"nope")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(good)), QUrl.fromLocalFile(str(bad))])
    event = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    panel.dropEvent(event)
    qtbot.waitUntil(lambda: panel.local.topLevelItemCount() == 1, timeout=WAIT_MS)
    assert panel.local.topLevelItem(0).text(0) == "good.gguf"
    assert not panel.error_banner.isHidden()
    assert "bad.gguf is not a usable GGUF" in panel.error_banner.title()


def _local_names(panel: LibraryPanel) -> list[str]:
    return [panel.local.topLevelItem(i).text(0) for i in range(panel.local.topLevelItemCount())]


def test_the_main_window_shows_the_library_panel(qtbot, bridge, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    window = MainWindow(bridge, pages=default_pages())
    qtbot.addWidget(window)
    panel = window.page(LIBRARY)
    assert isinstance(panel, LibraryPanel) and panel.offline
    model = tmp_path / "models" / "m.gguf"
    model.parent.mkdir(parents=True)
    model.write_bytes(GGUF)
    panel.refresh_local()
    qtbot.waitUntil(lambda: "m.gguf" in _local_names(panel), timeout=WAIT_MS)
    panel.local.setCurrentItem(panel.local.topLevelItem(_local_names(panel).index("m.gguf")))
    panel.local_view.load_selected()
    # the window's own, checked load path took it
    assert window.model_label.text().startswith("Loading m.gguf")
    assert window.file_banner.isHidden()
    client_of(bridge).emit_loaded(str(model))
    qtbot.waitUntil(lambda: panel.local_view.models[0].settings != {}, timeout=WAIT_MS)
    assert panel.local_view.models[0].settings["n_ctx"] > 0
    assert "Last loaded with" in panel.local.topLevelItem(0).toolTip(0)


def test_changing_the_models_folder_is_saved_for_the_next_start(qtbot, hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path / "data"))
    panel = make_panel(qtbot, tmp_path)
    panel.local_view.set_models_folder(tmp_path / "elsewhere")
    from engine.hub.settings import load_settings

    assert load_settings().models_dir == tmp_path / "elsewhere"
    assert "next start" in panel.local_view.folder_label.text()


def test_status_text_shows_bytes_rate_and_time_left() -> None:
    from app.library.widgets import eta_text, job_status_text
    from engine.hub.queue import DOWNLOADING, Job
    from engine.hub.records import Progress, RemoteFile

    file = RemoteFile(REPO, "m.gguf", 4 * 1024**3, None)
    job = Job("j", REPO, "m.gguf", "Q4_0", (file,), (Path("/nonexistent/m.gguf"),), DOWNLOADING)
    job.progress = Progress("downloading", 1024**3, 4 * 1024**3, 50 * 1024**2, 61.44)
    assert job_status_text(job) == "1.0 GiB of 4.0 GiB · 50.0 MiB/s · 61 s left"
    assert eta_text(600) == "10 min left" and eta_text(7200) == "2.0 h left"
    job.state, job.message = "failed", "HTTP 500 … resume"
    assert job_status_text(job) == "HTTP 500 … resume"


def test_an_older_scan_that_finishes_last_does_not_hide_newer_models(qtbot, tmp_path) -> None:
    panel = make_panel(qtbot, tmp_path, offline=True)
    release = threading.Event()
    scan = panel.library.scan

    def first_scan_is_slow():
        found = scan()  # before the model below is written: finds nothing...
        release.wait(10)  # ...and answers after the second scan (a busy machine)
        return found

    panel.library.scan = first_scan_is_slow
    panel.refresh_local()
    model = tmp_path / "models" / "m.gguf"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(GGUF)
    panel.library.scan = scan
    panel.refresh_local()
    qtbot.waitUntil(lambda: panel.local.topLevelItemCount() == 1, timeout=WAIT_MS)
    release.set()
    qtbot.waitUntil(lambda: not panel.runner.busy, timeout=WAIT_MS)
    assert panel.local.topLevelItemCount() == 1


SUGGESTED = [
    CatalogueEntry(REPO, "tiny-Q8_0.gguf", "Tiny Q8", "The test model."),
    CatalogueEntry("org/other-GGUF", "o-Q4_0.gguf", "Other", "Another one."),
]


def test_the_first_visit_suggests_models_that_fit_with_badges(qtbot, hub, tmp_path) -> None:
    panel = make_panel(qtbot, tmp_path, catalogue=lambda: SUGGESTED)
    assert not panel.suggestions.asked  # nothing asked of the Hub before the page is seen
    panel.show()
    qtbot.waitUntil(lambda: panel.suggestions.tree.topLevelItemCount() == 2, timeout=WAIT_MS)
    rows = [panel.suggestions.tree.topLevelItem(i) for i in range(2)]
    assert {row.text(0) for row in rows} == {"Tiny Q8", "Other"}
    assert {row.text(2) for row in rows} == {"Fits"}
    assert "All on the GPU" in rows[0].toolTip(2)
    asked = len(hub.requests)
    panel.hide()
    panel.show()  # a second visit asks nothing again
    qtbot.wait(100)
    assert len(hub.requests) == asked

    panel.suggestions.tree.setCurrentItem(rows[0])
    qtbot.mouseClick(panel.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(panel.rows) == 1, timeout=WAIT_MS)
    [row] = panel.rows.values()
    assert row.title.text().endswith(rows[0].data(0, Qt.ItemDataRole.UserRole).model.name)


def test_no_suggestions_offline_and_a_quiet_line_without_a_connection(
    qtbot, tmp_path, monkeypatch
) -> None:
    offline = make_panel(qtbot, tmp_path / "a", offline=True, catalogue=lambda: SUGGESTED)
    offline.show()
    assert offline.suggestions.isHidden() and not offline.suggestions.asked

    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    panel = make_panel(qtbot, tmp_path / "b", catalogue=lambda: SUGGESTED)
    panel.show()
    qtbot.waitUntil(lambda: panel.suggestions.note.text() == NO_CONNECTION, timeout=WAIT_MS)
    assert panel.error_banner.isHidden()  # not an error: nobody asked for it


def test_models_opened_from_anywhere_and_the_starter_are_listed(
    qtbot, bridge, tmp_path, monkeypatch, starter_model
) -> None:
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    window = MainWindow(bridge, pages=default_pages())
    qtbot.addWidget(window)
    panel = window.page(LIBRARY)
    qtbot.waitUntil(lambda: STARTER_FILE in _local_names(panel), timeout=WAIT_MS)
    starter_row = panel.local.topLevelItem(_local_names(panel).index(STARTER_FILE))
    assert starter_row.text(3) == "comes with Hearth (demo)"

    opened = tmp_path / "Downloads" / "found-Q4_K_M.gguf"  # File > Open, a drop or --model
    opened.parent.mkdir()
    opened.write_bytes(GGUF)
    open_in_window(qtbot, window, opened)
    qtbot.waitUntil(lambda: "found-Q4_K_M.gguf" in _local_names(panel), timeout=WAIT_MS)
    row = panel.local.topLevelItem(_local_names(panel).index("found-Q4_K_M.gguf"))
    assert row.text(3) == "opened from its folder" and row.text(4) != "never"


def test_a_download_without_a_sha256_is_shown_unverified(qtbot, hub, tmp_path) -> None:
    hub.add_repo("org/mirror-GGUF", {"m-Q8_0.gguf": GGUF}, not_in_lfs={"m-Q8_0.gguf"})
    panel = make_panel(qtbot, tmp_path)
    [model] = HubClient(token=False).repo_files("org/mirror-GGUF").models
    panel.queue.add(model)
    qtbot.waitUntil(lambda: bool(panel.rows) and next(iter(panel.rows.values())).state == DONE,
                    timeout=WAIT_MS)  # fmt: skip
    row = next(iter(panel.rows.values()))
    assert "Not verified: the Hub lists no sha256" in row.status.text()
    assert "sha256 verified" not in row.status.text()
    qtbot.waitUntil(lambda: panel.local.topLevelItemCount() == 1, timeout=WAIT_MS)
    item = panel.local.topLevelItem(0)
    assert item.text(3) == "org/mirror-GGUF · unverified"
    assert "Not verified: the Hub listed no sha256" in item.toolTip(0)


def test_after_a_full_disk_the_row_offers_to_delete_what_was_kept(qtbot, hub, tmp_path) -> None:
    import errno

    from engine.hub.download import write_all

    def full_after_1000_bytes(f, chunk: bytes) -> None:
        if f.tell() + len(chunk) > 1000:
            write_all(f, chunk[: 1000 - f.tell()])
            raise OSError(errno.ENOSPC, "No space left on device")
        write_all(f, chunk)

    panel = make_panel(qtbot, tmp_path)
    panel.queue._options = {"reserve_bytes": 0, "write": full_after_1000_bytes}
    [model] = [m for m in HubClient(token=False).repo_files(REPO).models if m.quant == "Q8_0"]
    job = panel.queue.add(model)
    qtbot.waitUntil(lambda: bool(panel.rows) and next(iter(panel.rows.values())).state == FAILED,
                    timeout=WAIT_MS)  # fmt: skip
    row = next(iter(panel.rows.values()))
    assert "The 1,000 bytes received are kept in tiny-Q8_0.gguf.part" in row.status.text()
    assert row.cancel_button.text() == "Delete 1,000 B received"
    qtbot.mouseClick(row.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not part_path(job.path).exists(), timeout=WAIT_MS)


def test_a_vision_models_projector_is_downloaded_with_it_and_paired(qtbot, hub, tmp_path):
    from testkit.tiny_vision import write_tiny_projector

    projector = write_tiny_projector(tmp_path / "p.gguf", text_embd=64).read_bytes()
    hub.add_repo("org/vlm-GGUF", {"vlm-Q8_0.gguf": GGUF, "mmproj-F16.gguf": projector},
                 downloads=1)  # fmt: skip
    panel = make_panel(qtbot, tmp_path)
    search_and_open(qtbot, panel, "vlm")
    assert {i.text(0): i.text(2) for i in panel.file_items()}["mmproj-F16.gguf"] == (
        "vision projector"
    )
    select_file(panel, "vlm-Q8_0.gguf")
    panel.download_selected()
    assert "with its vision projector mmproj-F16.gguf" in panel.status_label.text()
    qtbot.waitUntil(lambda: len(panel.rows) == 2 and all(r.state == DONE
                                                        for r in panel.rows.values()),
                    timeout=WAIT_MS)  # fmt: skip
    folder = tmp_path / "models" / "org" / "vlm-GGUF"
    [model] = Library(tmp_path / "models", scan_hf_cache=False).scan()
    assert model.name == "vlm-Q8_0.gguf" and model.projector == folder / "mmproj-F16.gguf"
    # listed once, as a model that sees (once the list is read again after both downloads)
    panel.local_view.refresh()
    qtbot.waitUntil(lambda: panel.local.topLevelItemCount() == 1
                    and panel.local.topLevelItem(0).text(1) == "Q8_0 + vision",
                    timeout=WAIT_MS)  # fmt: skip
    assert "mmproj-F16.gguf" in panel.local.topLevelItem(0).toolTip(0)
