"""Kernel tests run on the GPU where torch sees one, else on the CPU through Triton's
interpreter (TRITON_INTERPRET=1, set here before any kernel module is imported) on small
shapes. `gpu`-marked tests add the full model shapes and run on the device only."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("the kernels' extra (torch, triton) is not installed", allow_module_level=True)

import torch

# Triton reads TRITON_INTERPRET when it is first imported, so this must come before that.
assert "triton" not in sys.modules or os.environ.get("TRITON_INTERPRET") is not None
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def device() -> str:
    return DEVICE


def relative_error(actual, expected) -> float:
    import numpy as np

    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert np.isfinite(actual).all(), "non-finite values in the kernel's output"
    return float(np.linalg.norm(actual - expected) / max(np.linalg.norm(expected), 1e-30))
