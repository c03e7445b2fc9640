"""How many parallel requests the planner finds room for (the starter model, made-up machines)."""

from engine.hardware.records import Detection, Device
from engine.server.capacity import parallel_that_fit
from engine.session import MachineSnapshot, PlanSource, RememberedChoice, plan_load


def _cpu_only(free_bytes: int) -> MachineSnapshot:
    cpu = Device(id="cpu", vendor="other", name="CPU", kind="CPU", backends=("cpu",),
                 source="psutil", total_bytes=2 * free_bytes, free_bytes=free_bytes)  # fmt: skip
    return MachineSnapshot(detection=Detection(devices=(cpu,)), gpu_offload=False)


def test_the_count_is_the_largest_that_fits(starter_model):
    machine = _cpu_only(2 * 1024**3)
    n = parallel_that_fit(starter_model, machine, per_request_ctx=8192)
    assert 1 <= n < 64

    def fits(k: int) -> bool:
        choice = RememberedChoice(n_ctx=8192 * k)
        return plan_load(starter_model, machine, choice).source == PlanSource.CHOSEN

    assert fits(n) and not fits(n + 1)


def test_more_memory_fits_more_requests(starter_model):
    small = parallel_that_fit(starter_model, _cpu_only(1 * 1024**3), 8192)
    large = parallel_that_fit(starter_model, _cpu_only(4 * 1024**3), 8192)
    assert large > small


def test_on_the_hearth_engine_each_sequence_counts_its_own_pages(tmp_path):
    """An 8B-shaped file on a 12 GiB card: the Hearth engine's count is the largest n whose n
    sequences (their pages and decode rows, engine/planner/hearth_memory.py) the plan fits."""
    from testkit.synthetic_gguf import SHAPES, write_sparse_gguf
    from tests.engine.session.conftest import cpu, machine, nvidia

    path = write_sparse_gguf(tmp_path / "llama.gguf", SHAPES["llama3-8b"], "Q4_K_M")
    card = machine(nvidia(11.5, 12, cc="9.0"), cpu(24))
    hearth = parallel_that_fit(path, card, 2000, "q8", engine="hearth", type_v="q8")
    assert 1 <= hearth < 64

    def fits(n: int) -> bool:
        choice = RememberedChoice(n_ctx=2000 * n, kv_type="q8", engine="hearth", type_v="q8")
        return plan_load(path, card, choice, n_parallel=n).source == PlanSource.CHOSEN

    assert fits(hearth) and not fits(hearth + 1)
