"""The two errors a caller of the kernels can meet, importable without torch or triton."""

from __future__ import annotations


class UnsupportedTensor(ValueError):
    """A ggml type, KV cache format or tensor shape that no kernel here handles.

    The message names the type or shape and what is supported, so the caller can fall back
    (to llama.cpp, or to another format) instead of computing wrong numbers.
    """
