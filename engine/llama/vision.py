"""llama.cpp's multimodal library (mtmd) over a loaded model: a vision projector (mmproj) that
turns images into embeddings the model reads in place of tokens.

    projector = Projector(model, "mmproj-F16.gguf", n_threads=8, use_gpu=True)
    chunks = projector.tokenize(text_with_markers, [png_bytes, ...])
    for i, chunk in enumerate(chunks.parts): ...       # text tokens, or an image's positions
    n_past = chunks.eval_image(i, ctx, n_past, n_batch)  # encode the image, decode its embeddings

The prompt text carries `projector.marker` where each image goes; mtmd replaces each marker
with the model's own image tokens (Gemma 3's <start_of_image>, Qwen-VL's <|vision_start|>, ...)
and cuts the prompt into text chunks and image chunks. Images are decoded by mtmd itself
(stb_image) from the bytes given: callers check their headers first (engine/chat/images.py).
Each wrapper owns its C handle and frees it in `close()`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from dataclasses import dataclass

import llama_cpp.llama_cpp as C
import llama_cpp.mtmd_cpp as M

from engine.hardware.cpu_probe import physical_cores
from engine.llama.driver import Context, EngineError, Model
from engine.llama.log import process_log

TEXT = M.MTMD_INPUT_CHUNK_TYPE_TEXT
IMAGE = M.MTMD_INPUT_CHUNK_TYPE_IMAGE


@dataclass(frozen=True)
class Part:
    """One chunk of a tokenized prompt: text tokens, or an image's n_tokens positions."""

    kind: int  # TEXT or IMAGE (audio is never given)
    tokens: tuple[int, ...]  # the text's tokens; for an image, a stand-in id per position
    n_pos: int  # positions it takes in the KV cache (M-RoPE images take fewer than tokens)


class Projector:
    def __init__(self, model: Model, path: str, *, n_threads: int = 0, use_gpu: bool = True):
        if not os.path.isfile(path):
            raise EngineError(
                f"No projector file at {path}. Put the model's mmproj GGUF back, or load the "
                "model without it (it then takes text only)."
            )
        _log_through_llama()
        params = M.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.print_timings = False
        params.n_threads = n_threads or physical_cores()
        params.warmup = True
        handle = M.mtmd_init_from_file(os.fsencode(path), model.handle, params)
        if not handle:
            raise EngineError(
                f"llama.cpp could not load the vision projector {os.path.basename(path)}. It "
                "may belong to another model (its embeddings must match the model's) or use a "
                "projector type this engine version does not know; the engine's last lines "
                "say more. Load the model without it to chat in text."
            )
        self._handle = handle
        self.model = model
        self.path = path
        if not M.mtmd_support_vision(handle):
            self.close()
            raise EngineError(
                f"{os.path.basename(path)} is a projector for audio, not images; Hearth shows "
                "images only. Load the model without it, or with its vision projector."
            )
        self.marker = (M.mtmd_default_marker() or b"<__media__>").decode("utf-8")
        self.uses_mrope = bool(M.mtmd_decode_use_mrope(handle))

    @property
    def handle(self):
        if self._handle is None:
            raise EngineError("The vision projector was unloaded.")
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            M.mtmd_free(self._handle)
            self._handle = None

    def tokenize(self, text: str, images: list[bytes]) -> Chunks:
        """`text` (with one marker per image) and the images, as mtmd's chunks. Raises
        EngineError when an image cannot be decoded or the markers and images disagree."""
        bitmaps = []
        try:
            for i, data in enumerate(images):
                buf = (ctypes.c_uint8 * len(data)).from_buffer(bytearray(data))
                bitmap = M.mtmd_helper_bitmap_init_from_buf(self.handle, buf, len(data), False)
                if not bitmap:
                    raise EngineError(
                        f"Image {i + 1} could not be decoded. Send it as a PNG or JPEG."
                    )
                bitmaps.append(bitmap)
                # The image's identity: mtmd passes it on to the chunk, and it becomes the
                # stand-in ids below (the same image in the next turn reuses its cached KV).
                M.mtmd_bitmap_set_id(bitmap, hashlib.sha256(data).hexdigest()[:32].encode())
            raw = text.encode("utf-8", "replace")
            inp = M.mtmd_input_text()
            inp.text = raw
            inp.text_len = len(raw)
            inp.add_special = True
            inp.parse_special = True
            handle = M.mtmd_input_chunks_init()
            if not handle:
                raise EngineError("llama.cpp could not make room for the prompt's chunks.")
            chunks = Chunks(self, handle)
            arr = (M.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            rc = M.mtmd_tokenize(self.handle, handle, ctypes.byref(inp), arr, len(bitmaps))
            if rc != 0:
                chunks.close()
                raise EngineError(_TOKENIZE_FAILURES.get(rc, f"mtmd could not read the prompt "
                                                             f"(error {rc})."))  # fmt: skip
            chunks.read_parts()
            return chunks
        finally:
            for bitmap in bitmaps:
                M.mtmd_bitmap_free(bitmap)


_TOKENIZE_FAILURES = {
    1: "The prompt's image markers and its images disagree in number.",
    2: "An image could not be prepared for the projector. Send it as a PNG or JPEG.",
}


class Chunks:
    """A prompt cut into text and image chunks (mtmd_input_chunks), owned."""

    def __init__(self, projector: Projector, handle):
        self.projector = projector
        self._handle = handle
        self.parts: list[Part] = []

    def read_parts(self) -> None:
        parts = []
        for i in range(M.mtmd_input_chunks_size(self._handle)):
            chunk = M.mtmd_input_chunks_get(self._handle, i)
            kind = M.mtmd_input_chunk_get_type(chunk)
            if kind == TEXT:
                n = ctypes.c_size_t()
                pointer = M.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                tokens = tuple(pointer[j] for j in range(n.value)) if n.value else ()
                parts.append(Part(TEXT, tokens, len(tokens)))
                continue
            if kind != IMAGE:
                raise EngineError("The prompt holds audio; Hearth shows images only.")
            n_tokens = M.mtmd_input_chunk_get_n_tokens(chunk)
            identity = M.mtmd_input_chunk_get_id(chunk) or b""
            parts.append(Part(IMAGE, stand_in_ids(identity, n_tokens),
                              M.mtmd_input_chunk_get_n_pos(chunk)))  # fmt: skip
        self.parts = parts

    def eval_image(self, index: int, ctx: Context, n_past: int, n_batch: int) -> int:
        """Encode image chunk `index` and decode its embeddings into `ctx` at position
        `n_past` (sequence 0); the position after it. The logits of its last position are
        kept, for a prompt that ends with an image."""
        chunk = M.mtmd_input_chunks_get(self._handle, index)
        new_n_past = C.llama_pos(0)
        rc = M.mtmd_helper_eval_chunk_single(
            self.projector.handle, ctx.handle, chunk, n_past, 0, n_batch, True,
            ctypes.byref(new_n_past),
        )  # fmt: skip
        if rc != 0:
            raise EngineError(
                "The image could not be encoded or decoded into the context (llama.cpp error "
                f"{rc}); there may not be enough memory. Try a smaller image or a shorter "
                "context."
            )
        return new_n_past.value

    def close(self) -> None:
        if self._handle is not None:
            M.mtmd_input_chunks_free(self._handle)
            self._handle = None


def _log_through_llama() -> None:
    """mtmd's lines (its load errors among them) into the process's llama.cpp log, so a
    refused projector's reason reaches LoadFailed.details as llama.cpp's own errors do."""
    callback = process_log().callback
    M.mtmd_log_set(callback, None)
    M.mtmd_helper_log_set(callback, None)


def stand_in_ids(identity: bytes, n_tokens: int) -> tuple[int, ...]:
    """Ids for an image's positions in the list of cached tokens: negative (never a real
    token), different for different images (from the image's hash) and for each position."""
    base = int.from_bytes(hashlib.sha256(identity).digest()[:4], "little") & 0x3FFFFFFF
    return tuple(-1 - ((base + i) & 0x3FFFFFFF) for i in range(n_tokens))


def next_position(ctx: Context) -> int:
    """The position after the last one cached in sequence 0 (0 when it is empty)."""
    return C.llama_memory_seq_pos_max(ctx.memory, 0) + 1
