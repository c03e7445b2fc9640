"""Choose the llama.cpp backend to build for this machine, and the CMake flags for it.

Runs with the system Python before the virtual environment exists, so it uses the standard
library only. Prints shell assignments (BACKEND=..., CMAKE_ARGS=..., NOTE=...) for setup_env.sh.

The choice follows the GPU that is present *and* the toolkit needed to build for it: a GPU
whose toolkit is missing gets a message saying what to install, and the CPU build meanwhile.
HEARTH_BACKEND overrides the detection (cuda, rocm, vulkan, metal, cpu).
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess

BACKENDS = ("cuda", "rocm", "vulkan", "metal", "cpu")


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _nvidia_archs() -> list[str]:
    out = _run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    archs = {line.strip().replace(".", "") for line in out.splitlines() if line.strip()}
    return sorted(a for a in archs if a.isdigit())


def _amd_gfx_targets() -> list[str]:
    out = _run(["rocminfo"])
    targets = {word for word in out.split() if word.startswith("gfx") and word[3:].isalnum()}
    return sorted(targets)


def _has_nvidia_gpu() -> bool:
    return bool(_nvidia_archs())


def _has_amd_gpu() -> bool:
    drm = "/sys/class/drm"
    if not os.path.isdir(drm):
        return False
    for card in os.listdir(drm):
        try:
            with open(os.path.join(drm, card, "device", "vendor")) as f:
                if f.read().strip() == "0x1002":
                    return True
        except OSError:
            continue
    return False


# ggml-vulkan uses VK_EXT_layer_settings, in the Vulkan headers since 1.3.261.
MIN_VULKAN_HEADER = 261


def _vulkan_header_version(include_dirs: list[str]) -> int | None:
    for folder in include_dirs:
        try:
            with open(os.path.join(folder, "vulkan", "vulkan_core.h")) as f:
                for line in f:
                    if line.startswith("#define VK_HEADER_VERSION "):
                        return int(line.split()[2])
        except (OSError, ValueError, IndexError):
            continue
    return None


def _vulkan_toolchain_missing() -> list[str]:
    missing = []
    if not shutil.which("glslc"):
        missing.append("glslc (Debian/Ubuntu: glslc)")
    sdk = os.environ.get("VULKAN_SDK")
    includes = [os.path.join(sdk, "include")] if sdk else []
    includes += ["/usr/include", "/usr/local/include"]
    version = _vulkan_header_version(includes)
    if version is None:
        missing.append("the Vulkan headers (Debian/Ubuntu: libvulkan-dev)")
    elif version < MIN_VULKAN_HEADER:
        missing.append(
            f"Vulkan headers 1.3.{MIN_VULKAN_HEADER} or newer (these are 1.3.{version}; on "
            "Debian 12, installers/vulkan_headers.sh fetches newer ones)"
        )
    spirv_configs = (
        "/usr/share/cmake/SPIRV-Headers",
        "/usr/lib/cmake/SPIRV-Headers",
        "/usr/local/share/cmake/SPIRV-Headers",
    )
    if not os.environ.get("VULKAN_SDK") and not any(os.path.isdir(p) for p in spirv_configs):
        missing.append("the SPIR-V headers (Debian/Ubuntu: spirv-headers)")
    return missing


def choose() -> tuple[str, list[str], str]:
    """Return (backend, cmake_args, note for the user)."""
    wanted = os.environ.get("HEARTH_BACKEND", "").strip().lower()
    if wanted and wanted not in BACKENDS:
        return (
            "cpu",
            [],
            f"HEARTH_BACKEND={wanted!r} is not one of {', '.join(BACKENDS)}; using cpu.",
        )

    if wanted == "metal" or (not wanted and platform.system() == "Darwin"):
        if platform.system() != "Darwin":
            return "cpu", [], "Metal builds need macOS; using the CPU build."
        return "metal", ["-DGGML_METAL=on"], ""

    if wanted == "cuda" or (not wanted and _has_nvidia_gpu()):
        if not shutil.which("nvcc"):
            return (
                "cpu",
                [],
                (
                    "An NVIDIA GPU is present but the CUDA toolkit (nvcc) is not installed. "
                    "Install the CUDA toolkit and run `make run` again for GPU speed; "
                    "using the CPU build now."
                ),
            )
        archs = _nvidia_archs() or ["native"]
        return "cuda", ["-DGGML_CUDA=on", f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}"], ""

    if wanted == "rocm" or (not wanted and _has_amd_gpu() and shutil.which("hipcc")):
        if not shutil.which("hipcc"):
            return (
                "cpu",
                [],
                (
                    "ROCm was asked for but hipcc is not installed. Install ROCm (hipcc, rocminfo) "
                    "and run `make run` again; using the CPU build now."
                ),
            )
        args = ["-DGGML_HIP=on"]
        targets = _amd_gfx_targets()
        if targets:
            args.append(f"-DAMDGPU_TARGETS={';'.join(targets)}")
        return "rocm", args, ""

    if wanted == "vulkan" or (not wanted and _has_amd_gpu()):
        missing = _vulkan_toolchain_missing()
        if missing:
            return (
                "cpu",
                [],
                (
                    "A GPU that Vulkan could drive is present but the build needs "
                    + " and ".join(missing)
                    + ". Install them and run `make run` again; using the CPU build now."
                ),
            )
        extra = os.environ.get("HEARTH_VULKAN_CMAKE_ARGS", "").split()
        return "vulkan", ["-DGGML_VULKAN=on", *extra], ""

    return "cpu", [], ""


def main() -> None:
    backend, cmake_args, note = choose()
    print(f"BACKEND={shlex.quote(backend)}")
    print(f"CMAKE_ARGS={shlex.quote(' '.join(cmake_args))}")
    print(f"NOTE={shlex.quote(note)}")


if __name__ == "__main__":
    main()
