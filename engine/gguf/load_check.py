"""Checks on a parsed header that spare llama.cpp a file it would abort on, or that cannot be
the file it claims to be.

llama.cpp trusts a header's tensor types: a norm weight typed I32 loads, then the first
decode aborts the whole process in `binary_op: unsupported types`, with 100 lines of backtrace
after the one line that says why. These rules are cheap (the header is already read) and hold
for every architecture llama.cpp knows, so a file that breaks them is refused before the engine
sees it, with a message that names the tensor.

`data_end_problem` is the structural check a download without a sha256 gets
(engine.hub.download): the header parses, and the tensor data ends where the header says.
"""

from __future__ import annotations

import math

from engine.gguf.model_info import ModelInfo, TensorInfo
from engine.untrusted_text import printable_line

# No llama.cpp operation multiplies, adds or normalises with integer weights; F64 has no
# kernels either. (Token ids and positions are integer tensors made at run time, never stored.)
_NOT_A_WEIGHT_TYPE = frozenset({"I8", "I16", "I32", "I64", "F64"})
# Norm weights and biases are multiplied element-wise (ggml_mul / ggml_add), which takes floats.
_NORM_TYPES = frozenset({"F32", "F16", "BF16"})
_MAX_NAMED = 3


def _is_norm(tensor: TensorInfo) -> bool:
    stem = tensor.name.rsplit(".", 1)[0]
    return stem.endswith("norm") or "_norm" in stem.rsplit(".", 1)[-1]


def _type_problem(tensor: TensorInfo) -> str | None:
    if not tensor.name.endswith((".weight", ".bias")):
        return None
    if tensor.type_name in _NOT_A_WEIGHT_TYPE:
        return f"{tensor.name} is typed {tensor.type_name}, which no weight can be"
    if len(tensor.shape) == 1 and _is_norm(tensor) and tensor.type_name not in _NORM_TYPES:
        return f"the norm {tensor.name} is typed {tensor.type_name} (norms are F32, F16 or BF16)"
    return None


def load_problem(info: ModelInfo, *, for_chat: bool = False) -> str | None:
    """Why llama.cpp must not be given this file (a sentence with what to do), or None."""
    if for_chat and info.tokenizer_model == "no_vocab":
        return (
            "it has no vocabulary (tokenizer.ggml.model is 'no_vocab'), so it cannot read or "
            "write text: it is an embedding or component file, not a chat model. Choose a chat "
            "model."
        )
    not_finite = non_finite_values(info)
    if not_finite:
        named = ", ".join(f"{printable_line(k)[:80]} = {v}" for k, v in not_finite[:_MAX_NAMED])
        return (
            f"its header holds numbers that are not finite ({named}); llama.cpp computes with "
            "them and aborts (a NaN norm epsilon ends the process at the first decode). The "
            "file is damaged or was made to crash programs: download the model from its "
            "publisher again."
        )
    found = [problem for t in info.tensors if (problem := _type_problem(t)) is not None]
    if not found:
        return None
    more = f" (and {len(found) - _MAX_NAMED} more)" if len(found) > _MAX_NAMED else ""
    return (
        f"its tensor types are impossible for their roles: {'; '.join(found[:_MAX_NAMED])}{more}. "
        "llama.cpp would abort on it; the file is damaged or was made to crash programs. "
        "Delete it and download the model from its publisher again."
    )


def non_finite_values(info: ModelInfo) -> list[tuple[str, float]]:
    """The header's numbers that are NaN or infinite (hyper-parameters such as
    `llama.attention.layer_norm_rms_epsilon`, rope bases, scales): no model has a use for one."""
    return [
        (key, value)
        for key, value in info.metadata.items()
        if isinstance(value, float) and not math.isfinite(value)
    ]


def data_end_problem(info: ModelInfo) -> str | None:
    """None when the tensor data ends where the header says (the file size, up to the
    alignment padding after the last tensor), else what is wrong."""
    end = max((info.data_offset + t.offset + t.n_bytes for t in info.tensors), default=None)
    if end is None:
        return "it holds no tensors"
    padded = -(-end // info.alignment) * info.alignment
    if not end <= info.file_size <= padded:
        return (
            f"its header says the tensor data ends at byte {end:,}, but the file is "
            f"{info.file_size:,} bytes long"
        )
    return None
