"""Can Hearth's kernels run here? Answered without crashing, with a reason a person can act on.

Triton compiles for NVIDIA GPUs of compute capability 8.0 (Ampere) and newer here. It also
compiles for AMD GPUs through ROCm builds of torch, but Hearth's kernels carry NVIDIA inline
assembly (PTX: the 4-bit unpacking, dp4a, griddepcontrol) that the ROCm backend cannot take, and
they have never run on an AMD GPU, so ROCm is refused with that reason. Apple (Metal) and
Vulkan-only machines have no Triton backend. With TRITON_INTERPRET=1 the kernels run on the CPU
through Triton's interpreter (the tests use this); that is for checking, far too slow for use.
"""

from __future__ import annotations

import functools
import os

MIN_CUDA_CAPABILITY = (8, 0)


class KernelsUnavailable(RuntimeError):
    """Hearth's kernels cannot run on this machine; the message says why and what to do."""


def interpret_mode() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


_EXTRA = "install Hearth with its kernels extra: pip install 'hearth[kernels]'"


@functools.cache
def available() -> tuple[bool, str]:
    """(True, device description) or (False, the reason). Never raises."""
    try:
        import torch
    except ImportError:
        return False, f"PyTorch is not installed; {_EXTRA}"
    except Exception as error:  # a broken CUDA install raises all sorts of things on import
        return False, f"PyTorch failed to load ({error}); reinstall it"
    try:
        import triton  # noqa: F401
    except ImportError:
        return False, f"Triton is not installed; {_EXTRA}"
    if interpret_mode():
        return True, "Triton interpreter on the CPU (TRITON_INTERPRET=1): correct but slow"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return False, "Apple GPU (Metal): Triton has no Metal backend; Hearth uses llama.cpp here"
    if not torch.cuda.is_available():
        return False, (
            "no CUDA or ROCm GPU visible to PyTorch (Vulkan-only GPUs have no Triton "
            "backend); Hearth uses llama.cpp here"
        )
    name = torch.cuda.get_device_name(0)
    if torch.version.hip is not None:
        return False, (
            f"{name} (ROCm): Hearth's kernels use NVIDIA inline assembly that Triton's AMD "
            "backend does not compile, and have not been tested on AMD GPUs; Hearth uses "
            "llama.cpp here"
        )
    capability = torch.cuda.get_device_capability(0)
    if capability < MIN_CUDA_CAPABILITY:
        major, minor = capability
        return False, (
            f"{name} has compute capability {major}.{minor}; Hearth's Triton kernels need "
            f"8.0 or newer (Ampere, Ada, Hopper, Blackwell); Hearth uses llama.cpp here"
        )
    return True, name


def require() -> None:
    """Raise KernelsUnavailable with the reason when the kernels cannot run here."""
    ok, why = available()
    if not ok:
        raise KernelsUnavailable(why)
