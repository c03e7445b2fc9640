"""Hearth's own GGUF header reader: strict, bounded, and able to read a file still on the Hub.

    from engine.gguf import read_model_info
    info = read_model_info("model.gguf")                      # a local file
    info = read_model_info(HubFileSource("org/repo", "model-Q4_K_M.gguf"))  # ranged HTTP reads

Only the header is read (magic, version, metadata, tensor infos), never tensor data. Every
problem with the file raises a GGUFError naming the field and its byte offset; no other
exception escapes, reading stops at a deadline, and memory stays within a small constant plus
what the header holds. The `gguf` package's GGUFReader is not used on files from strangers:
version 0.19.0 loops with memory growing without bound on a 43-byte file.
"""

from __future__ import annotations

import os

from engine.gguf.cursor import MAX_HEADER_BYTES, Cursor, Deadline
from engine.gguf.errors import (
    GGUFDeadlineError,
    GGUFError,
    GGUFInternalError,
    GGUFSourceError,
)
from engine.gguf.header import HeaderParser
from engine.gguf.interpret import build_model_info
from engine.gguf.model_info import MLADims, ModelInfo, RecurrentDims, SlidingWindow, TensorInfo
from engine.gguf.source import ByteSource, BytesSource, LocalFileSource

__all__ = [
    "MAX_HEADER_BYTES",
    "ByteSource",
    "BytesSource",
    "GGUFDeadlineError",
    "GGUFError",
    "GGUFInternalError",
    "GGUFSourceError",
    "LocalFileSource",
    "MLADims",
    "ModelInfo",
    "RecurrentDims",
    "SlidingWindow",
    "TensorInfo",
    "read_model_info",
]


def read_model_info(
    source: str | os.PathLike[str] | ByteSource, *, deadline_s: float = 5.0
) -> ModelInfo:
    """Read and validate the header of a GGUF file; see the module docstring."""
    deadline = Deadline(deadline_s)
    owned = isinstance(source, (str, os.PathLike))
    byte_source: ByteSource = LocalFileSource(source) if owned else source  # type: ignore[arg-type]
    cursor: Cursor | None = None
    try:
        cursor = Cursor(byte_source, deadline)
        parser = HeaderParser(cursor)
        raw = parser.parse()
        return build_model_info(
            raw, byte_source.name, lambda key, item: parser.array_string(raw, key, item)
        )
    except GGUFError:
        raise
    except Exception as exc:  # a reader defect: still report it as a GGUFError (see errors.py)
        offset = cursor.pos if cursor is not None else 0
        raise GGUFInternalError("reader", offset, f"{type(exc).__name__}: {exc}") from exc
    finally:
        if owned:
            byte_source.close()
