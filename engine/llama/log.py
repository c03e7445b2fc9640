"""llama.cpp's log, routed through the worker: debug lines dropped, the rest to stderr (where the
client keeps the last lines for crash reports), and the buffer sizes it reports while loading
collected, so the GUI can show what was really allocated next to what the planner predicted,
and its error lines kept, so a failed load can say what llama.cpp said.

llama.cpp's default logger prints every level, debug included; with sampling in the graph that
is a line per token on stderr, which the GUI process would then read and keep.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass

import llama_cpp.llama_cpp as C

from engine.untrusted_text import printable_line

# llama.cpp: "llama_model_load_from_file_impl: CUDA0 model buffer size = 4403.49 MiB" and the like
_BUFFER_LINE = re.compile(r"(\S+)\s+(model|KV|compute|output) buffer size =\s+([\d.]+) MiB")
# llama-model-loader.cpp (debug level): "tensor blk.0.ffn_up.weight (12 MiB f16) buffer type
# overridden to CPU"
_OVERRIDE_LINE = re.compile(r"tensor (\S+) \(.*\) buffer type overridden to (\S+)")
# llama-context.cpp, when flash attention is "auto": "...: Flash Attention enabled" or
# "...: Flash Attention not supported, set to disabled"
_FLASH_ATTN_LINE = re.compile(r"Flash Attention (enabled|not supported)")
_DEBUG, _ERROR, _CONT = 1, 4, 5  # enum ggml_log_level
_ERRORS_KEPT = 8
_install_lock = threading.Lock()
_process_log: LlamaLog | None = None


@dataclass(frozen=True)
class BufferAllocation:
    """A buffer llama.cpp reported allocating while loading (from its log)."""

    device: str  # "CUDA0", "CPU", "CPU_Mapped", ...
    kind: str  # "model", "KV", "compute", "output"
    bytes: int


def parse_buffer_line(text: str) -> BufferAllocation | None:
    match = _BUFFER_LINE.search(text)
    if not match:
        return None
    device, kind, mib = match.groups()
    return BufferAllocation(device=device, kind=kind, bytes=round(float(mib) * 1024 * 1024))


def process_log() -> LlamaLog:
    """The process's one LlamaLog, installed on first use.

    llama.cpp keeps the callback's address for the rest of the process, so the callback must
    live as long. A second LlamaLog used to replace the first, and when its owner let it go
    (logit_trace kept it in a local), ctypes freed the trampoline llama.cpp still called: a
    later model load in the same process crashed (SIGSEGV) or raised "cannot build parameter"
    from inside the log callback."""
    global _process_log
    with _install_lock:
        if _process_log is None:
            _process_log = LlamaLog()
        return _process_log


class LlamaLog:
    """llama.cpp's log callback and what it collected; use process_log(), never two of these."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._allocations: list[BufferAllocation] = []
        self._overridden: list[str] = []
        self._errors: list[str] = []
        self.flash_attn_resolved: bool | None = None  # what "auto" became, at the last load
        self._last_level = 0
        self._callback = C.llama_log_callback(self._on_log)
        C.llama_log_set(self._callback, None)

    @property
    def callback(self):
        """The callback itself, for llama.cpp's other libraries' loggers (mtmd's): their
        lines then land here too. It lives as long as the process's one LlamaLog."""
        return self._callback

    def take_allocations(self) -> tuple[BufferAllocation, ...]:
        """The buffers reported since the last call."""
        with self._lock:
            taken, self._allocations = tuple(self._allocations), []
        return taken

    def take_overridden(self) -> tuple[str, ...]:
        """Tensors placed by a buffer-type override since the last call."""
        with self._lock:
            taken, self._overridden = tuple(self._overridden), []
        return taken

    def take_errors(self) -> tuple[str, ...]:
        """llama.cpp's error lines since the last call (the first few), escaped for display."""
        with self._lock:
            taken, self._errors = tuple(self._errors), []
        return taken

    def _on_log(self, level: int, text: bytes, _user_data) -> None:
        if level == _CONT:
            level = self._last_level
        self._last_level = level
        if not text:
            return
        if level == _DEBUG:
            if b"overridden" in text:
                match = _OVERRIDE_LINE.search(text.decode("utf-8", "replace"))
                if match:
                    with self._lock:
                        self._overridden.append(match.group(1))
            return
        os.write(2, text)
        line = text.decode("utf-8", "replace")
        if level == _ERROR and line.strip():
            with self._lock:
                if len(self._errors) < _ERRORS_KEPT:
                    self._errors.append(printable_line(line.strip()[:1000]))
        if "Flash Attention" in line:
            match = _FLASH_ATTN_LINE.search(line)
            if match:
                self.flash_attn_resolved = match.group(1) == "enabled"
        found = parse_buffer_line(line)
        if found is not None:
            with self._lock:
                self._allocations.append(found)
