"""Experts in RAM with a token's picks split (engine/hearth/staged_experts.py): the first picks
by ggml, the others copied into device slots (here: CPU memory) and run by the ops' expert
path; the slots' layout (side by side in host memory, tensor by tensor in the slots) and the
step's pause (engine/hearth/graph_pieces.py, run eagerly). Tolerances as
tests/engine/hearth/test_cpu_experts.py's: ggml rounds x to its weights' partner format."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest
import torch

from engine.hearth import graph_pieces
from engine.hearth.cpu_experts import CpuExperts
from engine.hearth.expert_offload import ExpertPlacement
from engine.hearth.staged_experts import StagedExperts, StagingArea, whole_experts
from testkit.synthetic_moe import write_experts_gguf
from tests.engine.hearth.test_cpu_experts import (
    ON_THE_CPU_ONLY,
    QWEN3_LIKE,
    TOKENS,
    model_logits,
    relative_error,
)


@pytest.mark.parametrize(("expert_type", "bound"), [("F16", 5e-4), ("Q4_0", 1e-2)])
def test_a_split_gives_the_logits_of_experts_on_the_device(tmp_path, expert_type, bound):
    """The last layer's experts split: each decode step's first pick by ggml, its second
    copied into a slot, summed; the 6-token prefill reads every pick in place. The logits of
    the model with every expert on the device within ggml's rounding of x, one host step a
    decode step and none for the prefill."""
    from gguf import GGMLQuantizationType

    from tests.engine.hearth.tiny_models import tiny_spec, write_tiny_gguf

    spec = tiny_spec("qwen3moe", expert_type=GGMLQuantizationType[expert_type])
    assert spec.n_expert_used == 2
    path = write_tiny_gguf(tmp_path / "qwen3moe.gguf", spec)
    expected, _ = model_logits(path, ExpertPlacement())
    got, model = model_logits(path, ExpertPlacement(ram_layers=1, cpu_threads=1, split_picks=1))
    staged = model.layers[1].moe.experts
    assert isinstance(staged, StagedExperts) and staged.cpu_picks == 1
    assert not isinstance(model.layers[0].moe.experts, StagedExperts)
    assert not model.routes_on_host
    assert staged.steps == len(TOKENS) - 6
    assert relative_error(got, expected) < bound
    # without ggml's share the same steps are far off: the CPU's pick is in the sum
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CpuExperts, "run_at", lambda self, n, k, x, ids, weights, out: None)
        dropped, _ = model_logits(path, ExpertPlacement(ram_layers=1, cpu_threads=1,
                                                        split_picks=1))  # fmt: skip
    assert relative_error(dropped[6:], expected[6:]) > 10 * bound


def test_a_splits_share_can_change_between_steps(tmp_path):
    """The decode graph tries shares around the planned one (split_tuning): a model split 2
    of 4 picks has slots for 3, and steps at 1, 2 and 3 picks by ggml, the first copy by the
    copier or by the stepping thread, each give the logits of experts on the device, every
    share with its own host buffers."""
    from gguf import GGMLQuantizationType

    from tests.engine.hearth.tiny_models import placement_logits, tiny_spec, write_tiny_gguf

    spec = tiny_spec("qwen3moe", expert_type=GGMLQuantizationType.F16, n_expert_used=4)
    path = write_tiny_gguf(tmp_path / "qwen3moe.gguf", spec)
    expected, _ = model_logits(path, ExpertPlacement())
    settings = iter([(1, 0), (2, 1), (3, 1), (3, 0)])
    applied = []

    def share(model, position):
        c, early = next(settings)
        staged = model.layers[1].moe.experts
        staged.cpu_picks, staged.early_copies = c, early
        applied.append((c, early, staged.steps))

    got, model = placement_logits(
        path, ExpertPlacement(ram_layers=1, cpu_threads=1, split_picks=2), TOKENS, 6, share
    )
    staged = model.layers[1].moe.experts
    assert staged.area.n_slots == 3
    assert [steps for _, _, steps in applied] == [0, 1, 2, 3] and staged.steps == 4
    assert sorted(staged._boxes) == [1, 2, 3]
    assert relative_error(got, expected) < 5e-4


def test_the_stepping_thread_copies_its_early_picks_before_the_copier_launches(tmp_path):
    """early_copies 1: the stepping thread copies the GPU's first pick into slot 0 in its host
    step, the copier the others into slots 1..; the copier launches the next piece only once
    the stepping thread's copy is issued, and ggml runs after it."""
    from engine.hearth.staged_experts import _Mailbox

    area, whole = _area_and_whole(tmp_path)
    order = []
    cpu = type("Cpu", (), {"run_at": lambda self, *a: order.append("ggml")})()
    staged = StagedExperts(in_place=type("E", (), {"n_expert": 8})(), slots=None, whole=whole,
                           area=area, cpu=cpu, cpu_picks=1, early_copies=1)  # fmt: skip
    staged._boxes[1] = _Mailbox.make(torch.zeros(1, 64), 4, 1)
    staged._boxes[1].ids.copy_(torch.tensor([[1, 6, 0, 5]], dtype=torch.int32))
    issue = area._issue

    def logged(whole, experts, stream, first_slot=0):
        order.append(("copy", first_slot, list(experts)))
        issue(whole, experts, stream, first_slot)

    area._issue = logged
    handoffs = []

    def start(handoff):
        launched = graph_pieces.Handoff(handoff.wait, lambda: order.append("launch"))
        handoffs.append(launched)
        staged._start_copies(1, launched)

    graph_pieces.cut(functools.partial(staged._host_step, 1), torch.device("cpu"), start)
    assert order.index(("copy", 0, [6])) < order.index("launch")
    assert order.index(("copy", 0, [6])) < order.index("ggml")
    assert ("copy", 1, [0, 5]) in order and handoffs[0].launched.is_set()
    for slot, expert in enumerate((6, 0, 5)):
        assert torch.equal(area.staged[slot], whole[expert])


def test_a_host_step_that_fails_before_its_early_copies_lets_the_copier_launch(tmp_path):
    """Ids outside the layer stop the stepping thread before its early copy: the copier is
    released all the same (it launches, nothing copied), and the step raises what was
    wrong."""
    from engine.hearth.staged_experts import _Mailbox

    area, whole = _area_and_whole(tmp_path)
    cpu = type("Cpu", (), {"run_at": lambda self, *a: None})()
    staged = StagedExperts(in_place=type("E", (), {"n_expert": 8})(), slots=None, whole=whole,
                           area=area, cpu=cpu, cpu_picks=1, early_copies=1)  # fmt: skip
    staged._boxes[1] = _Mailbox.make(torch.zeros(1, 64), 4, 1)
    staged._boxes[1].ids.copy_(torch.tensor([[1, 9, 0, 5]], dtype=torch.int32))
    launched = []

    def start(handoff):
        staged._start_copies(1, graph_pieces.Handoff(handoff.wait, lambda: launched.append(1)))

    with pytest.raises(RuntimeError, match=r"outside 0\.\.7"):
        graph_pieces.cut(functools.partial(staged._host_step, 1), torch.device("cpu"), start)
    area.copies_issued()
    assert launched == [1]


def _experts_layer(tmp_path, types: dict):
    """One layer of 8 experts, 64 x 64 (the interpreter's GEMV is slow at larger shapes), 4
    picks a token: the file's expert tensors and the routing rule."""
    from engine.gguf import read_model_info
    from engine.hearth.config import MoeConfig
    from engine.hearth.weights import GGUFTensors

    shape = replace(QWEN3_LIKE, n_embd=64, n_ff_exp=64)
    path = write_experts_gguf(tmp_path / "experts.gguf", shape, 1, types)
    tensors = GGUFTensors(str(path), read_model_info(path))
    parts = [tensors.experts(f"blk.0.ffn_{r}_exps.weight") for r in ("gate", "up", "down")]
    rule = MoeConfig(n_expert=8, n_expert_used=4, n_ff_exp=shape.n_ff_exp,
                     gating="softmax", normalize=True)  # fmt: skip
    return parts, rule


@ON_THE_CPU_ONLY
def test_kernels_ops_split_a_tokens_picks_between_ggml_and_the_copied_slots(tmp_path):
    """KernelsOps (Triton's interpreter here; the unpack by torch on the CPU) with a layer
    split 1 of 4 picks to the CPU: a decode step's sum is ggml's for the first pick plus the
    expert GEMV's over the other three's slots, from the same router logits, and those slots
    hold exactly the picked experts' planes."""
    from engine.hearth.ops import KernelsOps
    from engine.hearth.routing import select_experts

    parts, rule = _experts_layer(tmp_path, {"gate": "Q4_0", "up": "Q4_0", "down": "Q4_0"})
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.standard_normal((1, 64)).astype(np.float32) * 0.02)
    logits = torch.from_numpy(rng.standard_normal((1, 8)).astype(np.float32))
    ops = KernelsOps("cpu")
    staged = ops.prepare_experts_staged(*parts, "silu", (None, None, None), 4, cpu_picks=1,
                                        n_threads=1)  # fmt: skip
    got = ops.moe_ffn(x, staged, logits, rule).numpy()
    ids, weights = select_experts(logits, 4, gating="softmax", normalize=True)
    on_cpu = staged.cpu.run(x.numpy(), ids[:, :1].numpy(), weights[:, :1].numpy())
    rest = ops.moe_ffn_selected(x, staged.in_place, ids[:, 1:].contiguous(),
                                weights[:, 1:].contiguous())  # fmt: skip
    np.testing.assert_allclose(got, rest.float().numpy() + on_cpu, rtol=1e-5, atol=1e-7)
    assert staged.steps == 1
    for slot, expert in enumerate(ids[0, 1:].tolist()):
        for name, plane in staged.slots.gate.packed.planes.items():
            n_out = staged.slots.gate.n_out
            host = staged.in_place.gate.packed.planes[name]
            assert torch.equal(plane[slot * n_out : (slot + 1) * n_out],
                               host[expert * n_out : (expert + 1) * n_out])  # fmt: skip


def test_the_staging_area_lays_out_what_it_copied(tmp_path):
    """Experts side by side in host memory (whole_experts), copied into slots and unpacked:
    each slot's tensors are the host expert's, for every tensor of the layout."""
    from engine.gguf import read_model_info
    from engine.hearth.ops import TorchOps
    from engine.hearth.weights import GGUFTensors

    shape = replace(QWEN3_LIKE, n_embd=64, n_ff_exp=64)
    path = write_experts_gguf(tmp_path / "e.gguf", shape, 1,
                              {"gate": "Q4_0", "up": "Q4_0", "down": "Q8_0"})  # fmt: skip
    tensors = GGUFTensors(str(path), read_model_info(path))
    parts = [tensors.experts(f"blk.0.ffn_{r}_exps.weight") for r in ("gate", "up", "down")]
    ops = TorchOps("cpu")
    host = ops._host_experts(*parts, "silu", (None, None, None))
    from engine.hearth.staged_experts import expert_sizes

    area = StagingArea(expert_sizes(host), 3, torch.device("cpu"))
    whole = whole_experts(host, area, pin=False)
    slots = area.slot_experts(host)
    area.copy_in_when_done(whole, lambda: [7, 0, 4], _eager_handoff())
    area.copies_issued()
    area.unpack(3)
    for name in ("gate", "up", "down"):
        got, want = getattr(slots, name).data, getattr(host, name).data
        assert got.shape[0] == 3
        for slot, expert in enumerate((7, 0, 4)):
            assert torch.equal(got[slot], want[expert])


def test_a_cut_runs_its_host_step_in_place_when_nothing_is_captured():
    """Eagerly (no capture: the CPU, or a GPU step before its graph is made) the pause is the
    host step itself, run at once."""
    ran = []
    assert graph_pieces.can_cut(torch.device("cpu"))
    graph_pieces.cut(lambda: ran.append(1), torch.device("cpu"))
    assert ran == [1]


def test_a_split_asks_for_a_share_of_the_picks():
    with pytest.raises(ValueError, match="between 1 and 7"):
        ExpertPlacement(ram_layers=2, split_picks=8).check(128, 8)
    with pytest.raises(ValueError, match="no cache"):
        ExpertPlacement(ram_layers=2, split_picks=3, cache_slots=16).check(128, 8)
    ExpertPlacement(ram_layers=2, split_picks=3).check(128, 8)


@ON_THE_CPU_ONLY
@pytest.mark.parametrize("cpu_picks", [1, 2])
def test_kernels_ops_route_a_staged_layer_in_the_norms_launch(tmp_path, cpu_picks):
    """KernelsOps.norm_and_moe_ffn takes the FFN norm and the router in one launch for staged
    experts as for experts on the device (the routing's ids and weights handed to the split):
    the same norm outputs, and the experts' sum within ggml's rounding of x for its picks
    of four (Q8_0 experts: about 0.5% of those picks' share). At 2 of 4 the area has a slot
    more than the step fills (for the share of 1 that the decode graph may try)."""
    from engine.gguf.ggml_types import GGML_TYPES_BY_NAME
    from engine.hearth.forward import MoeBlock
    from engine.hearth.ops import KernelsOps
    from engine.hearth.weights import QuantWeight

    parts, rule = _experts_layer(tmp_path, {"gate": "Q8_0", "up": "Q8_0", "down": "Q8_0"})
    rng = np.random.default_rng(7)
    router = torch.from_numpy(rng.standard_normal((8, 64)).astype(np.float32))
    ops = KernelsOps("cpu")
    prepared = ops.prepare(QuantWeight("r", GGML_TYPES_BY_NAME["F32"].id, 8, 64, router))
    a = torch.from_numpy(rng.standard_normal((1, 64)).astype(np.float32)).to(ops.dtype)
    h = torch.from_numpy(rng.standard_normal((1, 64)).astype(np.float32)).to(ops.dtype)
    norm = torch.ones(64, dtype=torch.float32)
    staged = ops.prepare_experts_staged(*parts, "silu", (None, None, None), 4,
                                        cpu_picks=cpu_picks, n_threads=1)  # fmt: skip
    assert staged.area.n_slots == 3
    outputs = {}
    for name, experts in (("device", ops.prepare_experts(*parts, "silu")), ("staged", staged)):
        moe = MoeBlock(router=prepared, experts=experts)
        outputs[name] = ops.norm_and_moe_ffn([experts], a, h, norm, 1e-6, moe, rule)
    (f_dev, y_dev, h_dev, _), (f_st, y_st, h_st, _) = outputs["device"], outputs["staged"]
    assert torch.equal(y_dev, y_st) and torch.equal(h_dev, h_st)
    assert staged.steps == 1  # the split ran: ggml's picks, the slots' others
    assert relative_error(f_st.float().numpy(), f_dev.float().numpy()) < 1e-2


def test_the_copier_runs_jobs_in_turn_and_hands_back_their_errors():
    """staged_experts._Copier: jobs run one at a time on its thread; what one raises comes
    back from the next wait(), and so does a failed bind (every job then fails, none hangs)."""
    from engine.hearth.staged_experts import _Copier

    done = []
    copier = _Copier(lambda: None)
    for i in range(3):
        copier.submit(done.append, i)
    copier.wait()
    assert done == [0, 1, 2]
    copier.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        copier.wait()
    copier.wait()  # handed back once

    def no_device():
        raise RuntimeError("no context")

    broken = _Copier(no_device)
    broken.submit(done.append, 9)
    with pytest.raises(RuntimeError, match="no context"):
        broken.wait()
    assert done == [0, 1, 2]


def test_a_cut_starts_its_before_wait_work_then_runs_the_host_step():
    """A cut with work to start before the host waits for the device (the copier's, for
    staged experts) starts it first, handing it what to wait for and what to launch after
    (eagerly nothing: the code after the cut is the next piece), then runs the host step."""
    ran = []

    def before(handoff):
        handoff.wait()
        handoff.launch_next()
        ran.append(("before", handoff.launched.is_set()))

    graph_pieces.cut(lambda: ran.append("step"), torch.device("cpu"), before)
    assert ran == [("before", True), "step"]


def _eager_handoff():
    return graph_pieces.Handoff(lambda: None, lambda: None)


def _area_and_whole(tmp_path):
    from engine.gguf import read_model_info
    from engine.hearth.ops import TorchOps
    from engine.hearth.staged_experts import expert_sizes
    from engine.hearth.weights import GGUFTensors

    shape = replace(QWEN3_LIKE, n_embd=64, n_ff_exp=64)
    path = write_experts_gguf(tmp_path / "e.gguf", shape, 1,
                              {"gate": "Q4_0", "up": "Q4_0", "down": "Q8_0"})  # fmt: skip
    tensors = GGUFTensors(str(path), read_model_info(path))
    parts = [tensors.experts(f"blk.0.ffn_{r}_exps.weight") for r in ("gate", "up", "down")]
    host = TorchOps("cpu")._host_experts(*parts, "silu", (None, None, None))
    area = StagingArea(expert_sizes(host), 3, torch.device("cpu"))
    return area, whole_experts(host, area, pin=False)


def test_the_copier_copies_the_picks_it_reads_after_its_wait(tmp_path):
    """copy_in_when_done: the copier thread asks for the picks (once the device is done) and
    copies them into slots 0.. beside the caller; copies_issued then has every copy in place.
    Twice, as a step's layers do."""
    area, whole = _area_and_whole(tmp_path)
    for experts in ([7, 0, 4], [2, 5]):
        read = []
        handoff = graph_pieces.Handoff(lambda r=read: r.append("waited"),
                                       lambda r=read: r.append("launched"))  # fmt: skip
        area.copy_in_when_done(whole, lambda e=experts, r=read: r.append(e) or e, handoff)
        area.copies_issued()
        assert read == ["waited", experts, "launched"]
        for slot, expert in enumerate(experts):
            assert torch.equal(area.staged[slot], whole[expert])


def test_what_the_copier_meets_is_raised_to_the_stepping_thread(tmp_path):
    """A failure on the copier thread (its wait, the picks, a copy) is raised by the caller's
    copies_issued, nothing is copied, and the copier goes on serving the next step."""
    area, whole = _area_and_whole(tmp_path)
    before = area.staged.clone()

    def failing_picks():
        raise RuntimeError("the GPU's step before the experts' copies failed (CUDA error 700)")

    area.copy_in_when_done(whole, failing_picks, _eager_handoff())
    with pytest.raises(RuntimeError, match="CUDA error 700"):
        area.copies_issued()
    assert torch.equal(area.staged, before)
    area.copy_in_when_done(whole, lambda: [3], _eager_handoff())
    area.copies_issued()
    assert torch.equal(area.staged[0], whole[3])


def test_a_step_with_picks_outside_the_layer_stops_before_ggml_or_a_copy_reads_them(tmp_path):
    """The ids the router wrote are checked before ggml or a copy reads host memory by them:
    the step raises what was wrong, ggml is never called, nothing is copied, and the next
    step with good ids runs."""
    from engine.hearth.staged_experts import _Mailbox

    area, whole = _area_and_whole(tmp_path)
    before = area.staged.clone()
    called = []
    cpu = type("Cpu", (), {"run_at": lambda self, *a: called.append(a)})()
    staged = StagedExperts(in_place=type("E", (), {"n_expert": 8})(), slots=None, whole=whole,
                           area=area, cpu=cpu, cpu_picks=1)  # fmt: skip
    staged._boxes[1] = _Mailbox.make(torch.zeros(1, 64), 4, 1)
    staged._boxes[1].ids.copy_(torch.tensor([[1, 2, 8, 3]], dtype=torch.int32))
    with pytest.raises(RuntimeError, match=r"expert ids \[1, 2, 8, 3\] outside 0..7"):
        _pause(staged)
    assert called == []
    area.copies_issued()
    assert torch.equal(area.staged, before)
    staged._boxes[1].ids.copy_(torch.tensor([[1, 2, 7, 3]], dtype=torch.int32))
    _pause(staged)
    assert len(called) == 1
    assert [torch.equal(area.staged[s], whole[e]) for s, e in enumerate((2, 7, 3))] == [True] * 3


def _pause(staged, c: int = 1) -> None:
    """A split's pause as a step on the CPU makes it (graph_pieces.cut, eagerly)."""
    graph_pieces.cut(functools.partial(staged._host_step, c), torch.device("cpu"),
                     functools.partial(staged._start_copies, c))  # fmt: skip


def _failing_staged(tmp_path, run_at):
    from engine.hearth.staged_experts import _Mailbox

    area, whole = _area_and_whole(tmp_path)
    cpu = type("Cpu", (), {"run_at": run_at})()
    staged = StagedExperts(in_place=type("E", (), {"n_expert": 8})(), slots=None, whole=whole,
                           area=area, cpu=cpu, cpu_picks=1)  # fmt: skip
    staged._boxes[1] = _Mailbox.make(torch.zeros(1, 64), 4, 1)
    staged._boxes[1].ids.copy_(torch.tensor([[1, 2, 7, 3]], dtype=torch.int32))
    return staged


def test_a_host_step_that_fails_still_raises_the_flag(tmp_path):
    """The next piece may be queued before ggml ends and waits on the device for the flag: a
    host step that fails (here ggml) raises the flag all the same, then raises its error; ggml
    writes its sum before the flag goes up when it succeeds."""

    def broken(self, *args):
        raise RuntimeError("ggml_backend_graph_compute failed (status 1)")

    staged = _failing_staged(tmp_path, broken)
    with pytest.raises(RuntimeError, match="status 1"):
        _pause(staged)
    assert staged._boxes[1].raised[0] == 1
    staged.area.copies_issued()

    seen = []

    def writes(self, n, k, x, ids, weights, out):
        seen.append(int(staged._boxes[1].raised[0]))  # down while ggml computes
        staged._boxes[1].out.fill_(2.0)

    staged.cpu.run_at = writes.__get__(staged.cpu)
    _pause(staged)
    assert seen == [0] and staged._boxes[1].raised[0] == 1
    assert torch.equal(staged._boxes[1].out, torch.full((1, 64), 2.0))


def test_a_device_that_stopped_waiting_is_reported_at_the_next_step(tmp_path):
    """A flag the device left at TIMED_OUT (it waited seconds for ggml's sum and added what
    was there) makes the next host step fail with what happened and what to do, before ggml
    runs, the flag raised for the piece already queued."""
    from kernels.host_published import TIMED_OUT

    called = []
    staged = _failing_staged(tmp_path, lambda self, *a: called.append(a))
    staged._boxes[1].raised[0] = TIMED_OUT
    with pytest.raises(RuntimeError, match=r"stopped waiting.*reload the model"):
        _pause(staged)
    assert called == [] and staged._boxes[1].raised[0] == 1
    staged.area.copies_issued()
