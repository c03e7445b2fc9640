"""Build llama-cpp-python for one backend, with Hearth's patches to its llama.cpp, and print the
wheel's path. Used by installers/setup_env.sh (Linux, macOS) and installers/windows/install.ps1,
run with the Python of the environment the wheel is for:

    .venv/bin/python installers/build_engine.py --backend cuda --cmake-args "-DGGML_CUDA=on ..."
        [--version 0.3.36] [--cache DIR] [--sdist FILE]

The wheel goes into a folder of our own, CACHE/wheels/<backend>-<key> (CACHE: $HEARTH_CACHE,
else ~/.cache/hearth or %LOCALAPPDATA%\\hearth; the wheels folder: $HEARTH_WHEEL_CACHE if set),
and is reused while the key is the same. pip's own wheel cache cannot be used: it keys a wheel
built from source by the sdist alone, not by CMAKE_ARGS, so it would hand a CPU build to a CUDA
request. The key hashes the version, backend, CMake flags, Python and platform, and the text of
the patches applied.

Every backend is built with llama.cpp's RPC backend (-DGGML_RPC=ON, added here so that the
Linux, macOS and Windows installers all get it): it adds libggml-rpc to the same compile, which
`hearth host` serves from (engine/hardware/rpc_server.py) and which loads layers onto helper
machines. The flag is part of the CMake flags the key hashes, so a wheel built without it is not
reused.

The build: the sdist (`pip download`, kept in CACHE/sdist; or --sdist FILE, for a machine
without network) is unpacked into a temporary folder, the patches of installers/patches/ that
name the backend are applied to its vendor/llama.cpp (installers/source_patches.py), and
`pip wheel` builds that folder with CMAKE_ARGS.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import source_patches
from build_progress import run_with_progress

LLAMA_VERSION = "0.3.36"
RPC_FLAG = "-DGGML_RPC=ON"
# llama.cpp's AMX matrix products (ggml-cpu/amx, compiled in when -march=native finds AMX, as
# on Sapphire Rapids and later Xeons) crash on some of those machines: ggml_backend_amx_mul_mat
# segfaulted at the starter model's first prompt on this project's x86 build machine
# (llama.cpp issue 20824, closed without a fix). ggml compiles them only where
# __AMX_INT8__ is defined; an explicit -mno-amx-int8 wins over -march=native (GCC and Clang
# keep explicitly disabled ISA extensions off), and the AVX-512 paths remain.
NO_AMX_FLAGS = "-DCMAKE_C_FLAGS=-mno-amx-int8 -DCMAKE_CXX_FLAGS=-mno-amx-int8"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def default_cache() -> Path:
    if os.environ.get("HEARTH_CACHE"):
        return Path(os.environ["HEARTH_CACHE"])
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "hearth"
    return Path.home() / ".cache" / "hearth"


def build_key(
    version: str, backend: str, cmake_args: str, patches: list[source_patches.Patch]
) -> tuple[str, str]:
    """(key, what it hashes). Without patches it is the key earlier installers used, so their
    cached wheels stay valid."""
    source = f"{version}|{backend}|{cmake_args}|{sys.version_info[:2]} {sysconfig.get_platform()}"
    if patches:
        source += f"|patches {source_patches.digest(patches)}"
    return hashlib.sha256(source.encode()).hexdigest()[:16], source


def with_rpc(cmake_args: str) -> str:
    """The CMake flags with the RPC backend on, unless the caller's flags already say RPC."""
    if "GGML_RPC" in cmake_args:
        return cmake_args
    return f"{cmake_args} {RPC_FLAG}".strip()


def without_amx(cmake_args: str, machine: str | None = None, system: str | None = None) -> str:
    """The CMake flags with llama.cpp's AMX kernels left out on x86-64 (not under MSVC, which
    never builds them), unless the caller's flags set the C or C++ flags themselves."""
    machine = (machine or platform.machine()).lower()
    system = system or platform.system()
    if machine not in ("x86_64", "amd64") or system == "Windows":
        return cmake_args
    if "CMAKE_C_FLAGS" in cmake_args or "CMAKE_CXX_FLAGS" in cmake_args:
        return cmake_args
    return f"{cmake_args} {NO_AMX_FLAGS}".strip()


def fetch_sdist(version: str, cache: Path) -> Path:
    folder = cache / "sdist"
    found = sorted(folder.glob(f"llama_cpp_python-{version}.tar.gz"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            *PIP,
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(folder),
            f"llama-cpp-python=={version}",
        ],
        check=True,
        stdout=sys.stderr,
    )
    found = sorted(folder.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        raise SystemExit(f"hearth: pip did not download llama-cpp-python {version}'s sdist")
    return found[0]


def unpack(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as tar:
        tar.extractall(into, filter="data")  # "data": no absolute paths, links out or devices
    roots = [p for p in into.iterdir() if p.is_dir()]
    if len(roots) != 1 or not (roots[0] / "vendor" / "llama.cpp").is_dir():
        raise SystemExit(f"hearth: {sdist} is not a llama-cpp-python sdist")
    return roots[0]


def build(args: argparse.Namespace) -> Path:
    args.cmake_args = without_amx(with_rpc(args.cmake_args))
    patches = source_patches.patches_for(args.backend)
    key, key_source = build_key(args.version, args.backend, args.cmake_args, patches)
    wheels_root = Path(os.environ.get("HEARTH_WHEEL_CACHE") or args.cache / "wheels")
    wheel_dir = wheels_root / f"{args.backend}-{key}"
    wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl"))
    if wheels:
        return wheels[0]
    sdist = args.sdist or fetch_sdist(args.version, args.cache)
    print(
        f"hearth: building llama-cpp-python {args.version} for {args.backend} (a few minutes)...",
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory(prefix="hearth-engine-") as work:
        source = unpack(sdist, Path(work) / "src")
        try:
            source_patches.apply(source / "vendor" / "llama.cpp", patches)
        except source_patches.PatchError as exc:
            raise SystemExit(
                f"hearth: {exc}. The patches in installers/patches/ are written for "
                f"llama-cpp-python {LLAMA_VERSION}; build that version, or update the patch."
            ) from None
        for patch in patches:
            print(f"hearth: applied {patch.name}", file=sys.stderr)
        out = Path(work) / "wheel"
        env = {**os.environ, "CMAKE_ARGS": args.cmake_args}
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        # -v: pip passes the build's output through, which is where its progress is read from
        wheel = [*PIP, "wheel", "-v", "--no-deps", "--no-cache-dir", "-w", str(out), str(source)]
        if run_with_progress(wheel, env=env) != 0:
            raise SystemExit("hearth: building the engine failed (its last lines are above)")
        built = sorted(out.glob("llama_cpp_python-*.whl"))
        if not built:
            raise SystemExit("hearth: pip built no llama-cpp-python wheel")
        shutil.rmtree(wheel_dir, ignore_errors=True)
        wheel_dir.mkdir(parents=True)
        target = wheel_dir / built[0].name
        shutil.move(built[0], target)
    (wheel_dir / "KEY").write_text(key_source + "\n")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--cmake-args", default="")
    parser.add_argument("--version", default=LLAMA_VERSION)
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument("--sdist", type=Path, help="a downloaded sdist, instead of pip download")
    args = parser.parse_args()
    print(build(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
