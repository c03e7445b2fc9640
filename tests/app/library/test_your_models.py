"""'Your models' says whether each model fits this machine, and a refused Load is not a use."""

from __future__ import annotations

from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.app.conftest import WAIT_MS, client_of, make_window


def test_your_models_has_a_fits_column_and_a_refused_load_is_not_a_use(
    qtbot, bridge, tmp_path, monkeypatch
):
    monkeypatch.setenv("HEARTH_DATA_DIR", str(tmp_path))  # the library: tmp_path/models
    models = tmp_path / "models"
    models.mkdir()
    small = write_sparse_gguf(models / "Llama-3-8B-Q4_K_M.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    big = write_sparse_gguf(models / "Mixtral-8x7B-Q4_K_M.gguf", SHAPES["mixtral-8x7b"], "Q4_K_M")
    window = make_window(qtbot, bridge, tmp_path)
    view = window.page("Library").local_view
    view.refresh()

    def rows():
        tree = view.tree
        return {
            tree.topLevelItem(i).text(0): tree.topLevelItem(i)
            for i in range(tree.topLevelItemCount())
        }

    qtbot.waitUntil(lambda: {small.name, big.name} <= set(rows()), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: rows()[big.name].text(5) != "", timeout=WAIT_MS)
    assert rows()[small.name].text(5) == "Fits (CPU)"
    assert rows()[big.name].text(5) == "Does not fit"

    bridge.start()
    view.tree.setCurrentItem(rows()[big.name])
    view.load_selected()
    qtbot.waitUntil(lambda: not window.file_banner.isHidden(), timeout=WAIT_MS)
    assert client_of(bridge).loads() == []
    view.refresh()
    qtbot.wait(100)
    qtbot.waitUntil(lambda: big.name in rows(), timeout=WAIT_MS)
    assert rows()[big.name].text(4) == "never"
