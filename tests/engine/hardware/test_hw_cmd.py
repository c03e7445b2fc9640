import json

import pytest

from engine.cli import build_parser, hw_cmd, main
from engine.hardware.detection import detect
from engine.hardware.engine_view import EngineDevice, EngineView
from engine.hardware.records import GIB
from tests.engine.hardware.conftest import FakeGpu, FakeNvml


@pytest.fixture
def fake_machine(make_host, monkeypatch):
    """An RTX 4090 and a Ryzen; the installed engine is a CPU build."""
    host = make_host(nvml=FakeNvml([FakeGpu()]))
    asked = []

    def fake_probe(timeout_s=10):
        asked.append(timeout_s)
        cpu = EngineDevice("CPU", "AMD Ryzen 9 7950X", "cpu", "CPU", 20 * GIB, 32 * GIB)
        return EngineView(backends=("CPU",), devices=(cpu,), llama_cpp_version="0.3.36")

    monkeypatch.setattr(hw_cmd, "detect", lambda timeout_s: detect(host=host, timeout_s=timeout_s))
    monkeypatch.setattr(hw_cmd, "probe_engine_devices", fake_probe)
    return asked


def test_table_names_each_device_and_the_build_to_install(fake_machine, capsys):
    assert main(["hw"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA GeForce RTX 4090" in out
    assert "22.0 GiB free of 24.0 GiB" in out
    assert "1008 GB/s" in out
    assert "no - install cuda build" in out
    assert "HEARTH_BACKEND=cuda make run" in out
    assert 'CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=89"' in out
    assert "AMD Ryzen 9 7950X 16-Core Processor" in out
    assert "Engine: llama-cpp-python 0.3.36, backends CPU; GPU offload no" in out
    assert "nvml" in out and "vulkaninfo is not installed" in out
    assert fake_machine  # the engine was asked


def test_json_holds_devices_probes_and_the_engine_view(fake_machine, capsys):
    assert main(["hw", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["devices"][0]["name"] == "NVIDIA GeForce RTX 4090"
    assert data["devices"][0]["total_bytes"] == 24 * GIB
    assert data["devices"][-1]["kind"] == "cpu"
    assert {p["name"] for p in data["probes"]} == {"nvml", "amd", "apple", "vulkan", "cpu"}
    assert data["engine"]["backends"] == ["CPU"]
    hint = data["engine_status"][0]["hint"]
    assert hint["backend"] == "cuda" and hint["command"] == "HEARTH_BACKEND=cuda make run"


def test_no_engine_skips_the_engine_probe(fake_machine, capsys):
    assert main(["hw", "--json", "--no-engine"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine"] is None and data["engine_status"] is None
    assert fake_machine == []
    main(["hw", "--no-engine"])
    out = capsys.readouterr().out
    assert "Engine:" not in out and "NVIDIA GeForce RTX 4090" in out


def test_engine_failure_is_shown_not_raised(fake_machine, monkeypatch, capsys):
    monkeypatch.setattr(
        hw_cmd, "probe_engine_devices", lambda timeout_s=10: EngineView.failed("it crashed")
    )
    assert main(["hw"]) == 0
    out = capsys.readouterr().out
    assert "Engine: not asked (it crashed)" in out


def test_registered_as_hw_subcommand():
    args = build_parser().parse_args(["hw", "--json", "--no-engine", "--timeout", "1.5"])
    assert args._run is hw_cmd.run and args.json and args.no_engine and args.timeout == 1.5
