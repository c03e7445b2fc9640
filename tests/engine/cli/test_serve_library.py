"""How `hearth serve` without a model plans each Library model (engine/cli/serve_library.py):
with the server's --ctx x --parallel, within --memory-limit, refusing with the plan's numbers."""

import argparse

import pytest

from engine.cli.serve_library import GIB, budgets_of, library_planner, machine_within
from engine.hardware import Detection, Device
from engine.server.model_pool import ModelRefused
from engine.session import MachineSnapshot

ARGS = argparse.Namespace(ctx=256, parallel=2, kv=None, gpu_layers=None, threads=1)


def cpu_only(free_bytes: int) -> MachineSnapshot:
    cpu = Device(id="cpu", vendor="other", name="CPU", kind="CPU", backends=("cpu",),
                 source="psutil", total_bytes=64 * GIB, free_bytes=free_bytes)  # fmt: skip
    return MachineSnapshot(detection=Detection(devices=(cpu,)), gpu_offload=False)


def test_the_memory_limit_caps_every_device_and_the_budgets_follow():
    machine = machine_within(cpu_only(32 * GIB), GIB)
    assert [d.free_bytes for d in machine.devices] == [GIB]
    assert budgets_of(machine) == {"host": GIB}
    assert machine_within(cpu_only(GIB // 2), GIB).devices[0].free_bytes == GIB // 2
    assert machine_within(cpu_only(5), None).devices[0].free_bytes == 5


def test_a_model_that_fits_is_planned_with_the_servers_context(starter_model):
    planned = library_planner(cpu_only(16 * GIB), ARGS)(starter_model)
    assert planned.params.n_ctx == 512 and planned.params.n_parallel == 2
    assert planned.params.n_threads == 1
    assert 0 < planned.need["host"] < GIB and "512 tokens" in planned.summary


def test_a_model_that_cannot_fit_even_alone_is_refused_with_the_plans_numbers(starter_model):
    with pytest.raises(ModelRefused) as refused:
        library_planner(machine_within(cpu_only(16 * GIB), GIB // 8), ARGS)(starter_model)
    text = str(refused.value)
    assert "512 tokens of context (2 x 256)" in text and "GiB more on system RAM" in text
