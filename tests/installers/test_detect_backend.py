"""Which llama.cpp build `make run` asks for, and what it says when a toolkit is missing."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "installers" / "detect_backend.py"
spec = importlib.util.spec_from_file_location("detect_backend", SCRIPT)
detect = importlib.util.module_from_spec(spec)
spec.loader.exec_module(detect)


@pytest.fixture
def machine(monkeypatch):
    """A Linux machine with nothing on it; tests add GPUs and tools."""
    state = {"tools": set(), "nvidia": [], "amd": False, "vulkan_headers": None}
    monkeypatch.delenv("HEARTH_BACKEND", raising=False)
    monkeypatch.delenv("VULKAN_SDK", raising=False)
    monkeypatch.setattr(detect.platform, "system", lambda: "Linux")
    monkeypatch.setattr(
        detect.shutil, "which", lambda t: f"/usr/bin/{t}" if t in state["tools"] else None
    )
    monkeypatch.setattr(detect, "_nvidia_archs", lambda: list(state["nvidia"]))
    monkeypatch.setattr(detect, "_has_amd_gpu", lambda: state["amd"])
    monkeypatch.setattr(detect, "_amd_gfx_targets", lambda: ["gfx1100"])
    monkeypatch.setattr(detect, "_vulkan_header_version", lambda dirs: state["vulkan_headers"])
    real_isdir = detect.os.path.isdir
    monkeypatch.setattr(
        detect.os.path, "isdir",
        lambda p: state["vulkan_headers"] is not None if "SPIRV" in p else real_isdir(p),
    )  # fmt: skip
    return state


def test_no_gpu_builds_for_the_cpu(machine):
    assert detect.choose() == ("cpu", [], "")


def test_an_nvidia_gpu_with_nvcc_builds_cuda_for_its_architecture_only(machine):
    machine["nvidia"], machine["tools"] = ["89"], {"nvcc"}
    backend, args, note = detect.choose()
    assert backend == "cuda" and note == ""
    assert args == ["-DGGML_CUDA=on", "-DCMAKE_CUDA_ARCHITECTURES=89"]


def test_an_nvidia_gpu_without_nvcc_says_what_to_install_and_uses_the_cpu(machine):
    machine["nvidia"] = ["86"]
    backend, args, note = detect.choose()
    assert (backend, args) == ("cpu", [])
    assert "CUDA toolkit (nvcc)" in note


def test_an_amd_gpu_with_rocm_builds_hip_for_its_gfx_target(machine):
    machine["amd"], machine["tools"] = True, {"hipcc"}
    assert detect.choose()[:2] == ("rocm", ["-DGGML_HIP=on", "-DAMDGPU_TARGETS=gfx1100"])


def test_an_amd_gpu_without_rocm_takes_vulkan_when_its_tools_are_there(machine):
    machine["amd"], machine["tools"], machine["vulkan_headers"] = True, {"glslc"}, 309
    assert detect.choose()[:2] == ("vulkan", ["-DGGML_VULKAN=on"])


def test_a_vulkan_build_without_its_tools_names_each_missing_package(machine, monkeypatch):
    monkeypatch.setenv("HEARTH_BACKEND", "vulkan")
    backend, _, note = detect.choose()
    assert backend == "cpu"
    for package in ("glslc", "libvulkan-dev", "spirv-headers"):
        assert package in note


def test_vulkan_headers_too_old_for_the_engine_are_named_with_the_way_out(machine, monkeypatch):
    monkeypatch.setenv("HEARTH_BACKEND", "vulkan")
    machine["tools"], machine["vulkan_headers"] = {"glslc"}, 239
    backend, _, note = detect.choose()
    assert backend == "cpu"
    assert "1.3.239" in note and "installers/vulkan_headers.sh" in note


def test_extra_vulkan_flags_reach_the_build(machine, monkeypatch):
    monkeypatch.setenv("HEARTH_BACKEND", "vulkan")
    monkeypatch.setenv("HEARTH_VULKAN_CMAKE_ARGS", "-DVulkan_INCLUDE_DIR=/x/include")
    machine["tools"], machine["vulkan_headers"] = {"glslc"}, 309
    assert detect.choose()[1] == ["-DGGML_VULKAN=on", "-DVulkan_INCLUDE_DIR=/x/include"]


def test_an_unknown_backend_name_is_refused_with_the_choices(machine, monkeypatch):
    monkeypatch.setenv("HEARTH_BACKEND", "opencl")
    backend, _, note = detect.choose()
    assert backend == "cpu" and "cuda, rocm, vulkan, metal, cpu" in note


def test_metal_is_only_built_on_macos(machine, monkeypatch):
    monkeypatch.setenv("HEARTH_BACKEND", "metal")
    assert detect.choose()[0] == "cpu"
    monkeypatch.setattr(detect.platform, "system", lambda: "Darwin")
    assert detect.choose()[:2] == ("metal", ["-DGGML_METAL=on"])
