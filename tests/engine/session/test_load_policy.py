"""The load policy, by table: the person's choice if it fits, else the best fit, else nothing."""

from __future__ import annotations

import pytest

from engine.enums import KVType
from engine.session import (
    DEFAULT_CONTEXT,
    PlanSource,
    RememberedChoice,
    UnusableModelFile,
    plan_load,
    same_model,
    sibling_files,
)
from engine.session.machine import snapshot_machine
from tests.engine.session.conftest import GIB, cpu, machine, nvidia

GAMING_PC = machine(nvidia(11.5, 12), cpu(24))  # a 12 GiB card, 24 GiB of RAM free
SMALL_LAPTOP = machine(cpu(6, 8))  # no GPU, 6 GiB of RAM free


def test_first_load_is_the_best_fit_at_the_default_context(model_file):
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), GAMING_PC)
    assert decision.source == PlanSource.BEST_FIT and decision.fits
    assert decision.params.n_ctx == DEFAULT_CONTEXT
    assert decision.params.n_gpu_layers == 33  # all 32 layers and the output on the 12 GiB card
    assert decision.plan.fits and not decision.notes


@pytest.mark.parametrize(
    ("n_ctx", "kv_type", "layers"),
    [(4096, KVType.F16, None), (16384, KVType.Q8_0, None), (8192, KVType.Q4_0, 20)],
)
def test_a_remembered_choice_that_fits_is_what_loads(model_file, n_ctx, kv_type, layers):
    chosen = RememberedChoice(n_ctx=n_ctx, kv_type=kv_type, n_gpu_layers=layers)
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), GAMING_PC, chosen)
    assert decision.source == PlanSource.CHOSEN and decision.choice == chosen
    params = decision.params
    assert (params.n_ctx, params.type_k, params.type_v) == (n_ctx, kv_type, kv_type)
    assert params.n_gpu_layers == (33 if layers is None else layers)


def test_a_remembered_choice_that_no_longer_fits_falls_back_and_says_so(model_file):
    chosen = RememberedChoice(n_ctx=131072, kv_type=KVType.F16, n_gpu_layers=33)
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), GAMING_PC, chosen)
    assert decision.source == PlanSource.BEST_FIT and decision.fits
    assert decision.params.n_ctx < 131072
    assert len(decision.notes) == 1 and "131,072 tokens" in decision.notes[0]
    assert "more on" in decision.notes[0] and "kept" in decision.notes[0]


def test_a_chosen_vram_budget_limits_the_gpu(model_file):
    chosen = RememberedChoice(n_ctx=8192, vram_budget_bytes=3 * GIB)
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), GAMING_PC, chosen)
    assert decision.source == PlanSource.CHOSEN
    assert 0 < decision.params.n_gpu_layers < 33  # part of the 4.6 GiB of weights fit in 3 GiB
    gpu_use = decision.plan.devices[0]
    assert gpu_use.weights_bytes + gpu_use.kv_bytes + gpu_use.compute_bytes <= 3 * GIB


def test_a_model_that_fits_nowhere_is_not_loaded(model_file):
    decision = plan_load(model_file("mixtral-8x7b", "Q4_K_M"), SMALL_LAPTOP)
    assert decision.source == PlanSource.NOTHING_FITS
    assert not decision.fits and decision.params is None and decision.plan is None
    text = decision.refusal()
    assert "Even the leanest placement" in text and "GiB more on system RAM" in text


def test_nothing_fits_offers_another_quantization_beside_it(model_file):
    big = model_file("llama3-8b", "Q8_0", folder="repo")
    small = model_file("llama3-8b", "Q3_K_M", folder="repo")
    model_file("mistral-7b", "Q3_K_M", folder="repo")  # another model in the folder: not offered
    laptop = machine(cpu(5.5, 8))  # Q8_0 (8 GiB) does not fit, Q3_K_M (3.7 GiB) does
    decision = plan_load(big, laptop, siblings=sibling_files(big))
    assert not decision.fits
    assert [o.path for o in decision.options] == [small]
    assert decision.options[0].params.path == str(small)
    assert small.name in decision.refusal()


def test_a_cpu_only_engine_plans_for_the_cpu_even_with_a_gpu(model_file):
    cpu_build = machine(nvidia(11.5, 12), cpu(24), gpu_offload=False)
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), cpu_build)
    assert decision.fits and decision.params.n_gpu_layers == 0
    assert decision.summary().endswith("on the CPU")


def test_a_file_that_is_not_a_gguf_is_refused(tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    with pytest.raises(UnusableModelFile, match="not a readable GGUF"):
        plan_load(bad, GAMING_PC)


def test_same_model_tells_quantizations_from_other_models(model_file):
    from engine.gguf import read_model_info

    a = read_model_info(model_file("llama3-8b", "Q4_K_M"))
    b = read_model_info(model_file("llama3-8b", "Q8_0"))
    c = read_model_info(model_file("mistral-7b", "Q4_K_M"))
    assert same_model(a, b) and not same_model(a, c)


def test_snapshot_of_a_failing_detection_still_plans_for_the_cpu(model_file):
    def broken():
        raise RuntimeError("probe exploded")

    snap = snapshot_machine(broken)
    assert "probe exploded" in snap.detection.notes[0]
    assert not snap.has_usable_gpu and snap.plan_request().gpus == ()


# -- the engine ------------------------------------------------------------------------------------

H100_PC = machine(nvidia(78, 80, cc="9.0"), cpu(100))


def test_best_fit_takes_the_hearth_engine_only_where_it_was_measured_faster(model_file):
    # sm_90: engine_figures.json has both engines from one H100 run (Hearth 1.36x at worst)
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), H100_PC)
    assert decision.params.engine == "hearth" and decision.choice.engine == "hearth"
    assert decision.best.notes[0].startswith("Engine: Hearth engine")
    # sm_89 has no Hearth figures: llama.cpp, and the plan says why
    rtx4090 = machine(nvidia(23, 24, cc="8.9"), cpu(64))
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), rtx4090)
    assert decision.params.engine == "llama" and decision.choice.engine == "llama"
    assert "not been measured" in decision.best.notes[0]


@pytest.mark.parametrize(("kv_type", "type_v"), [("q8", "rot4"), ("rot4", None), ("f16", None)])
def test_a_remembered_hearth_choice_loads_on_the_hearth_engine(model_file, kv_type, type_v):
    chosen = RememberedChoice(n_ctx=16384, kv_type=kv_type, type_v=type_v, engine="hearth")
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), H100_PC, chosen)
    assert decision.source == PlanSource.CHOSEN and decision.params.engine == "hearth"
    assert (decision.params.type_k, decision.params.type_v) == (kv_type, type_v or kv_type)
    assert decision.summary().endswith("Hearth engine")


def test_a_hearth_choice_where_the_engine_cannot_run_falls_back_and_says_why(model_file):
    chosen = RememberedChoice(n_ctx=8192, kv_type="rot4", engine="hearth")
    old_card = machine(nvidia(11.5, 12, cc="7.5"), cpu(24))
    decision = plan_load(model_file("llama3-8b", "Q4_K_M"), old_card, chosen)
    assert decision.source == PlanSource.BEST_FIT and decision.params.engine == "llama"
    assert "compute capability 7.5" in decision.notes[0]


@pytest.mark.parametrize(
    ("data", "usable"),
    [
        ({"n_ctx": 8192, "kv_type": "q8", "type_v": "rot4", "engine": "hearth"}, True),
        ({"n_ctx": 8192, "kv_type": "rot2", "engine": "hearth"}, True),
        ({"n_ctx": 8192, "kv_type": "q8", "engine": "llama"}, False),  # not llama.cpp's name
        ({"n_ctx": 8192, "kv_type": "q8_0", "engine": "hearth"}, False),
        ({"n_ctx": 8192, "kv_type": "q8", "type_v": "rot2", "engine": "hearth"}, False),
        ({"n_ctx": 8192, "kv_type": "f16", "engine": "vllm"}, False),
        ({"n_ctx": 8192, "kv_type": "q4_0"}, True),  # saved before engines were remembered
    ],
)
def test_remembered_choices_hold_only_what_their_engine_holds(data, usable):
    choice = RememberedChoice.from_dict(data)
    assert (choice is not None) == usable
    if choice is not None:
        assert RememberedChoice.from_dict(choice.to_dict()) == choice


def test_a_helper_machine_takes_what_this_one_cannot_hold(model_file):
    """A model too big for this machine's card loads across a helper's, and the decision's
    parameters name the helper; without the helper (gone) it is planned here alone."""
    from dataclasses import replace

    from engine.hardware.remote import RemoteDevice, RemoteHost, RemoteLink

    address = "10.0.0.2:50052"
    card = RemoteDevice(address, 0, "CUDA0", "RTX 3090", "cuda", 23 * GIB, 24 * GIB, None, 936.0)
    helper = RemoteHost(address, (7, 0, 0), (card,), RemoteLink(0.0002, 1.1e9))
    here = replace(machine(nvidia(3.5, 4), cpu(24)), helpers=(helper,))
    path = model_file("llama3-8b", "Q4_K_M")
    decision = plan_load(path, here)
    assert decision.fits and decision.params.rpc_servers == (address,)
    assert decision.plan.devices[0].name == f"CUDA0 on {address}"
    assert any("Uses the helpers" in note for note in decision.notes)
    alone = plan_load(path, here.without_helpers([address]))
    assert alone.fits and alone.params.rpc_servers == ()


def test_speculative_decoding_s_memory_is_set_aside_before_the_plan(model_file):
    """A 7B draft model (4 GiB) beside an 8B on a 12 GiB card: the main model's plan is made
    against what is left, and the decision says how much was set aside."""
    from engine.runtime.protocol import SpeculativeParams

    main = model_file("llama3-8b", "Q4_K_M")
    draft_file = model_file("mistral-7b", "Q4_K_M", folder="d")
    draft = SpeculativeParams(method="draft_model", draft_path=str(draft_file))
    alone = plan_load(main, GAMING_PC)
    beside = plan_load(main, GAMING_PC, speculative=draft)
    assert any("set aside for speculative decoding (draft model)" in n for n in beside.notes)
    # the 8k context still fits beside the draft, with a q8_0 cache instead of f16
    assert (alone.choice.n_ctx, alone.choice.kv_type) == (8192, "f16")
    assert (beside.choice.n_ctx, beside.choice.kv_type) == (8192, "q8_0")
    off = plan_load(main, GAMING_PC, speculative=SpeculativeParams())
    assert off.choice == alone.choice and off.notes == alone.notes
    lookup = plan_load(main, GAMING_PC, speculative=SpeculativeParams(method="prompt_lookup"))
    assert any("(prompt lookup)" in n for n in lookup.notes)  # 16 rows of logits: 7.8 MiB


def test_a_vision_projector_beside_the_model_is_planned_and_loaded_with_it(model_file):
    """An mmproj dropped in beside the model: its memory is in the plan (on the GPU, with
    the model), its path in the load, and a note says what an image takes of the context."""
    from engine.gguf import read_model_info
    from engine.gguf.projector import projector_info
    from testkit.tiny_vision import TINY_IMAGE_TOKENS, write_tiny_projector

    main = model_file("llama3-8b", "Q4_K_M", folder="vision")
    projector = write_tiny_projector(main.parent / "mmproj-F16.gguf", text_embd=4096)
    decision = plan_load(main, GAMING_PC)
    assert decision.params.mmproj_path == str(projector)
    gpu = decision.plan.devices[0]
    weights = projector_info(read_model_info(projector)).weights_bytes
    assert gpu.projector_bytes > weights > 0
    assert any(f"an image takes up to {TINY_IMAGE_TOKENS} tokens" in n for n in decision.notes)
    # a projector of another model in the folder is passed over, saying why
    projector.unlink()
    write_tiny_projector(main.parent / "mmproj-F16.gguf", text_embd=576)
    other = plan_load(main, GAMING_PC)
    assert other.params.mmproj_path == ""
    assert any("does not go with this model" in n for n in other.notes)
    assert all(d.projector_bytes == 0 for d in other.plan.devices)
    # and a projector is never offered as another quantization of the model
    assert all("mmproj" not in p.name for p in sibling_files(main))


def test_a_projector_opened_as_a_model_says_what_it_is(tmp_path):
    from testkit.tiny_vision import write_tiny_projector

    projector = write_tiny_projector(tmp_path / "mmproj-F16.gguf", text_embd=64)
    with pytest.raises(UnusableModelFile, match=r"vision projector .* not a model"):
        plan_load(projector, GAMING_PC)
