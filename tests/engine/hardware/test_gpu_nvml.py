"""On an NVIDIA GPU: NVML's figures against CUDA's own, and the engine's device list against NVML.

Skipped (not failed) where there is no NVIDIA GPU, no torch, or no CUDA build of llama.cpp.
torch and llama.cpp each run in a child process of their own: their CUDA libraries need not mix
in one process, and the test process stays free of both.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.hardware import detect, probe_engine_devices, reconcile
from engine.hardware.records import OK

pytestmark = pytest.mark.gpu

# In one child: CUDA's view first (cudaMemGetInfo creates the process's CUDA context, which NVML
# then counts as used), then NVML's, for every GPU torch sees.
COMPARE_WITH_TORCH = """
import json, sys
try:
    import torch
except ImportError as exc:
    print(json.dumps({"skip": f"no torch: {exc}"})); sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"skip": "torch cannot use CUDA here"})); sys.exit(0)
from engine.hardware import detect
rows = []
for index in range(torch.cuda.device_count()):
    free_cuda, total_cuda = torch.cuda.mem_get_info(index)
    props = torch.cuda.get_device_properties(index)
    bus = getattr(props, "pci_bus_id", None)
    pci = None
    if bus is not None:
        pci = f"{getattr(props, 'pci_domain_id', 0):04x}:{bus:02x}:{props.pci_device_id:02x}.0"
    nvml = [d.to_dict() for d in detect(timeout_s=30).devices if d.source == "nvml"]
    rows.append({
        "name": props.name, "pci": pci, "capability": list(torch.cuda.get_device_capability(index)),
        "free": free_cuda, "total": total_cuda, "nvml": nvml,
    })
print(json.dumps({"rows": rows}))
"""


@pytest.fixture(scope="module")
def nvml_gpus():
    detection = detect(timeout_s=30)
    report = next(p for p in detection.probes if p.name == "nvml")
    gpus = [d for d in detection.devices if d.source == "nvml"]
    if report.status != OK or not gpus:
        pytest.skip(f"no NVIDIA GPU through NVML ({report.status}: {report.message})")
    return gpus


def test_nvml_total_and_free_agree_with_cuda(nvml_gpus):
    done = subprocess.run(
        [sys.executable, "-c", COMPARE_WITH_TORCH],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in answer:
        pytest.skip(answer["skip"])
    assert answer["rows"], "torch sees no GPU although NVML does"
    for row in answer["rows"]:
        matches = [g for g in row["nvml"] if row["pci"] and g["pci_bus_id"] == row["pci"]]
        gpu = matches[0] if matches else next(g for g in row["nvml"] if g["name"] == row["name"])
        print(
            f"\n{gpu['name']}: NVML total {gpu['total_bytes']} free {gpu['free_bytes']}; "
            f"CUDA total {row['total']} free {row['free']}; "
            f"{gpu['memory_bandwidth_gbps']} GB/s ({gpu['bandwidth_source']})"
        )
        assert gpu["total_bytes"] == pytest.approx(row["total"], rel=0.01)
        # Free against the total: another process may allocate between the two readings.
        assert abs(gpu["free_bytes"] - row["free"]) <= 0.01 * gpu["total_bytes"]
        assert gpu["compute_capability"] == "{}.{}".format(*row["capability"])


def test_the_engine_names_the_same_gpu_with_the_same_total(nvml_gpus):
    view = probe_engine_devices(timeout_s=120)
    assert view.ok, view.error
    if "CUDA" not in view.backends:
        pytest.skip(f"the installed llama.cpp is not a CUDA build ({', '.join(view.backends)})")
    cuda = [d for d in view.devices if d.backend == "CUDA"]
    assert len(cuda) == len(nvml_gpus)
    for engine_device in cuda:
        gpu = next(g for g in nvml_gpus if g.pci_bus_id == engine_device.pci_bus_id)
        print(f"\n{engine_device.name} = {engine_device.description}, {engine_device.total_bytes}")
        assert engine_device.description == gpu.name
        assert engine_device.total_bytes == pytest.approx(gpu.total_bytes, rel=0.01)
    statuses = reconcile(nvml_gpus, view)
    assert all(s.usable and s.engine_device.backend == "CUDA" for s in statuses)
