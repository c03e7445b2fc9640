"""Fixtures and hooks shared by every test package.

- Qt runs offscreen, so GUI tests need no display (set before pytest-qt makes its QApplication).
- Hearth's data folder (conversations, library, settings) is a fresh temporary folder for the
  session, so no test reads or writes the user's own; the Model page's background KV check is
  off (HEARTH_KV_CHECK=0) unless a test turns it on.
- `starter_model` (and `starter_path`, as a string), `gemma_model`: the two small real GGUFs
  (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M), from testkit/model_fixtures.py; each
  skips where its package is not installed.
- `gpu` marker: such tests run only where an NVIDIA GPU and a GPU build of llama.cpp are present
  (HEARTH_GPU_TESTS=1 forces them on, =0 off). The check imports llama_cpp in a child process,
  so a broken driver cannot crash the test session and the GUI tests' process never loads it.
- Every test starts with torch's global random generator seeded from its own name (where torch
  is imported): a test drawing inputs without a generator of its own draws the same ones in
  any order and on any xdist worker, so what it checks does not depend on the tests run before.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import pytest

from testkit.model_fixtures import gemma_model, starter_model, starter_path  # noqa: F401
from tests.keyring_stand_in import memory_keyring  # noqa: F401

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HEARTH_DATA_DIR"] = tempfile.mkdtemp(prefix="hearth-test-data-")
# The Model page's background KV check (engine/session/kv_quality.py) would start a llama.cpp
# process for every model a GUI test loads; its own tests turn it on where they need it.
os.environ.setdefault("HEARTH_KV_CHECK", "0")
# huggingface_hub's cache, which the Library lists: an empty one, not the user's.
# Tests never touch the person's keyring (engine/remote/keys.py); a test that needs one takes
# the `memory_keyring` fixture (tests/keyring_stand_in.py).
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
os.environ["HF_HOME"] = os.path.join(os.environ["HEARTH_DATA_DIR"], "hf-home")
# Triton reads TRITON_INTERPRET once, when the first test module to need it imports it (an
# engine test may come before tests/kernels): without an NVIDIA GPU every kernel runs in the
# interpreter, as tests/kernels/conftest.py also says. TRITON_INTERPRET=0 given outright keeps
# the compiler.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# A GPU of this machine in llama.cpp's device list (llama_supports_gpu_offload() also counts
# the RPC backend, which every Hearth build has).
_GPU_PROBE = (
    "import sys; from engine.llama.devices import local_gpu_offload; "
    "sys.exit(0 if local_gpu_offload() else 3)"
)


@pytest.fixture(autouse=True)
def _seeded_torch(request: pytest.FixtureRequest) -> None:
    """torch's global generator seeded from the test's name (the module docstring); nothing
    where torch is not imported (the GUI's tests do not load it)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@functools.cache
def gpu_available() -> tuple[bool, str]:
    forced = os.environ.get("HEARTH_GPU_TESTS")
    if forced is not None:
        return forced == "1", f"HEARTH_GPU_TESTS={forced}"
    if shutil.which("nvidia-smi") is None:
        return False, "no NVIDIA GPU (nvidia-smi not found); set HEARTH_GPU_TESTS=1 to force"
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _GPU_PROBE], capture_output=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        return False, "probing llama.cpp for GPU offload timed out"
    if probe.returncode != 0:
        return False, "llama.cpp here is not a GPU build (no GPU offload)"
    return True, "GPU build of llama.cpp with an NVIDIA GPU"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    available, why = gpu_available()
    if available:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {why}")
    for item in gpu_items:
        item.add_marker(skip)
