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
