"""installers/build_engine.py: every backend is built with llama.cpp's RPC backend, and the wheel
cache key says so (a wheel built before, without it, is not reused)."""

import argparse

import pytest

from tests.installers.test_source_patches import build_engine, sp


@pytest.mark.parametrize(
    ("given", "built"),
    [
        ("", "-DGGML_RPC=ON"),
        ("-DGGML_CUDA=on", "-DGGML_CUDA=on -DGGML_RPC=ON"),
        ("-DGGML_VULKAN=on -DGGML_RPC=OFF", "-DGGML_VULKAN=on -DGGML_RPC=OFF"),  # asked: kept
    ],
)
def test_the_rpc_backend_is_added_to_every_build(given, built):
    assert build_engine.with_rpc(given) == built


@pytest.mark.parametrize(
    ("given", "machine", "system", "built"),
    [
        ("-DGGML_RPC=ON", "x86_64", "Linux", f"-DGGML_RPC=ON {build_engine.NO_AMX_FLAGS}"),
        ("", "AMD64", "Darwin", build_engine.NO_AMX_FLAGS),
        ("-DGGML_RPC=ON", "AMD64", "Windows", "-DGGML_RPC=ON"),  # MSVC builds no AMX
        ("-DGGML_METAL=on", "arm64", "Darwin", "-DGGML_METAL=on"),
        ("-DCMAKE_C_FLAGS=-O2", "x86_64", "Linux", "-DCMAKE_C_FLAGS=-O2"),  # the caller's own
    ],
)
def test_amx_kernels_are_left_out_of_x86_builds(given, machine, system, built):
    """llama.cpp's AMX matrix products segfaulted on this project's x86 build machine."""
    assert build_engine.without_amx(given, machine, system) == built


def _args(tmp_path, cmake_args=""):
    return argparse.Namespace(
        backend="cpu",
        cmake_args=cmake_args,
        version=build_engine.LLAMA_VERSION,
        cache=tmp_path,
        sdist=tmp_path / "no-such-sdist.tar.gz",
    )


def _cache_wheel(tmp_path, cmake_args: str):
    key, _ = build_engine.build_key(
        build_engine.LLAMA_VERSION, "cpu", cmake_args, sp.patches_for("cpu")
    )
    folder = tmp_path / "wheels" / f"cpu-{key}"
    folder.mkdir(parents=True)
    wheel = folder / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"")
    return wheel


def test_a_cached_rpc_wheel_is_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("HEARTH_WHEEL_CACHE", raising=False)
    wheel = _cache_wheel(tmp_path, build_engine.without_amx("-DGGML_RPC=ON"))
    assert build_engine.build(_args(tmp_path)) == wheel


def test_a_wheel_cached_without_rpc_is_not_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("HEARTH_WHEEL_CACHE", raising=False)
    _cache_wheel(tmp_path, "")
    with pytest.raises((FileNotFoundError, SystemExit)):  # it goes on to build from the sdist
        build_engine.build(_args(tmp_path))
