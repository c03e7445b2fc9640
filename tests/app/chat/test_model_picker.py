"""The chat header's model picker: the library's models with their fits, the loaded one shown,
and a pick going through the window's load policy (a model that fits nowhere is refused)."""

from __future__ import annotations

from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.app.conftest import WAIT_MS, client_of, make_window, open_in_window


def test_the_picker_lists_the_library_with_fits_and_loads_through_the_policy(
    qtbot, bridge, tmp_path, starter_model, monkeypatch
):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))  # the library: tmp_path/models
    models = tmp_path / "models"
    models.mkdir()
    big = write_sparse_gguf(models / "Mixtral-8x7B-Q4_K_M.gguf", SHAPES["mixtral-8x7b"], "Q4_K_M")
    window = make_window(qtbot, bridge, tmp_path)
    bridge.start()
    open_in_window(qtbot, window, starter_model)
    picker = window.chat_view.header.model_picker
    qtbot.waitUntil(lambda: picker.count() == 3, timeout=WAIT_MS)
    labels = [picker.itemText(i) for i in range(picker.count())]
    assert f"{big.name} — Does not fit" in labels
    assert any(label.startswith(starter_model.name) and "Fits" in label for label in labels)
    assert picker.currentData() == starter_model  # the loaded one is shown

    loads = len(client_of(bridge).loads())
    picker.activated.emit(labels.index(f"{big.name} — Does not fit"))
    assert not window.file_banner.isHidden()
    assert window.file_banner.title() == f"{big.name} does not fit on this computer"
    assert len(client_of(bridge).loads()) == loads and picker.currentData() == starter_model
