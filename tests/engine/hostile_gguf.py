"""Hostile copies of a real model, made by the tests that use them.

- `with_metadata(src, dst, **strings)`: the same model with some metadata strings replaced
  (a `general.name` holding terminal escapes, a `tokenizer.chat_template` that is unsafe).
- `with_tensor_type(src, dst, tensor, type_name)`: the same bytes with one tensor's type id
  changed in its header entry (a norm weight typed I32: F32 and I32 are both 4 bytes, so the
  file stays consistent and llama.cpp loads it, then aborts on the first decode).
- `with_tensor_renamed(src, dst, tensor, new_name)`: a tensor llama.cpp needs is missing, which
  it reports with an error line of its own and refuses the file.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

from engine.gguf import read_model_info
from engine.gguf.ggml_types import GGML_TYPES_BY_NAME

# A Jinja template that reaches for Python internals, and still reads as ChatML to llama.cpp's
# template recogniser (so the fallback is the format the starter model really uses).
UNSAFE_TEMPLATE = (
    "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TERMINAL_ATTACK = "Evil\x1b]0;pwned\x07\x1b[2J\rFAKE: all checks passed\u202e"


def with_metadata(src: str | Path, dst: Path, **strings: str) -> Path:
    """Copy `src` to `dst` with the string metadata `key=value` replaced (dots as `__`)."""
    os.environ.setdefault("TQDM_DISABLE", "1")  # the gguf package's copy prints a progress bar
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(str(src))
    arch = reader.get_field("general.architecture").contents()
    writer = gguf.GGUFWriter(str(dst), arch, endianess=reader.endianess)
    changes = {
        key.replace("__", "."): MetadataDetails(gguf.GGUFValueType.STRING, value)
        for key, value in strings.items()
    }
    copy_with_new_metadata(reader, writer, changes, [])
    return dst


def with_tensor_type(src: str | Path, dst: Path, tensor: str, type_name: str) -> Path:
    """Copy `src` to `dst` with `tensor`'s ggml type replaced by `type_name` (same size)."""
    info = read_model_info(src)
    target = info.tensor(tensor)
    assert target is not None, f"{src} has no tensor {tensor}"
    old, new = GGML_TYPES_BY_NAME[target.type_name], GGML_TYPES_BY_NAME[type_name]
    assert (old.block_size, old.type_size) == (new.block_size, new.type_size)
    # tensor info: name (u64 length + bytes), n_dims (u32), dims (u64 each), type (u32), offset
    type_at = target.header_offset + 8 + len(target.name.encode()) + 4 + 8 * len(target.shape)
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        f.seek(type_at)
        assert struct.unpack("<I", f.read(4))[0] == old.id
        f.seek(type_at)
        f.write(struct.pack("<I", new.id))
    return dst


def with_tensor_renamed(src: str | Path, dst: Path, tensor: str, new_name: str) -> Path:
    """Copy `src` to `dst` with `tensor` renamed to `new_name` (of the same length): llama.cpp
    then misses a tensor it needs and refuses the file with an error of its own."""
    assert len(new_name.encode()) == len(tensor.encode())
    target = read_model_info(src).tensor(tensor)
    assert target is not None
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        f.seek(target.header_offset + 8)
        assert f.read(len(tensor)) == tensor.encode()
        f.seek(target.header_offset + 8)
        f.write(new_name.encode())
    return dst
