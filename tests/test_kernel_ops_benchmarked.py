"""Every public kernel op has a reference, tests and a row in the kernels' benchmark: read from
`python -m benchmarks.kernels --list` (run as a program: the test suite imports no benchmark),
whose references and test files must exist. Needs neither torch nor a GPU."""

import importlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# kernels' public functions (kernels/__init__.py), and the cache's ops the engine calls
PUBLIC = {
    "quant_matmul", "quantize_activation", "rms_norm", "rms_norm_quantized", "swiglu",
    "swiglu_quantized", "apply_rope", "dequantize", "kv_write", "kv_write_rope", "decode_attention",
    "kv_gather",
}  # fmt: skip


def listed() -> dict[str, dict[str, str]]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.kernels", "--list"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    ops: dict[str, dict[str, str]] = {}
    for line in done.stdout.splitlines():
        if not line.startswith(" "):
            name, kernel = line.split(": ", 1)
            ops[name] = {"kernel": kernel}
        else:
            key, value = line.split(maxsplit=1)
            ops[name][key] = value
    return ops


def _resolves(dotted: str) -> bool:
    module, _, attr = dotted.rpartition(".")
    return hasattr(importlib.import_module(module), attr)


def test_every_public_op_is_listed_with_a_reference_and_tests_that_exist():
    ops = listed()
    assert set(ops) >= PUBLIC, PUBLIC - set(ops)
    for name, op in ops.items():
        assert _resolves(op["reference"]), (name, op["reference"])
        for test in op["tests"].split(", "):
            path = test if test.startswith("tests/") else f"tests/kernels/{test}"
            assert (ROOT / path).is_file(), (name, path)
