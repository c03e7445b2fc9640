"""A tiny vision projector (mmproj) with random weights, and tiny images, for the tests.

The projector has Gemma 3's layout (a SigLIP-style encoder, then a 2-D average pool, an RMS norm
and one projection into the language model's embeddings: llama.cpp's PROJECTOR_TYPE_GEMMA3 in
tools/mtmd/clip.cpp and models/siglip.cpp), shrunk to one encoder layer 32 wide on 56×56
images: 4×4 patches of 14 pixels, pooled 2×2, give 4 image tokens. llama.cpp's multimodal
library (mtmd) loads it in milliseconds and encodes an image in well under a second on a CPU;
paired with any language model whose embeddings are `text_embd` wide (the starter model's are
576) it is a vision model whose output is noise but whose pipeline is whole.

    write_tiny_projector(path, text_embd=576)
    png = tiny_png(40, 30)                  # bytes of a valid PNG, 40×30, RGB
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

TINY_IMAGE_SIZE = 56
TINY_PATCH_SIZE = 14
TINY_MERGE = 2
TINY_IMAGE_TOKENS = (TINY_IMAGE_SIZE // TINY_PATCH_SIZE // TINY_MERGE) ** 2  # 4


def write_tiny_projector(
    path: str | Path, *, text_embd: int, n_embd: int = 32, n_ff: int = 64, seed: int = 0
) -> Path:
    """A Gemma-3-style projector feeding embeddings `text_embd` wide, random weights (F32)."""
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(str(path), "clip")
    writer.add_string("general.name", "tiny random gemma3 projector")
    writer.add_string("general.type", "mmproj")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "gemma3")
    writer.add_uint32("clip.vision.embedding_length", n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", n_ff)
    writer.add_uint32("clip.vision.block_count", 1)
    writer.add_uint32("clip.vision.projection_dim", text_embd)
    writer.add_uint32("clip.vision.attention.head_count", 2)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_uint32("clip.vision.image_size", TINY_IMAGE_SIZE)
    writer.add_uint32("clip.vision.patch_size", TINY_PATCH_SIZE)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    writer.add_uint32("clip.vision.projector.scale_factor", TINY_MERGE)
    writer.add_bool("clip.use_gelu", True)
    n_patches = (TINY_IMAGE_SIZE // TINY_PATCH_SIZE) ** 2

    def random(name: str, *shape: int) -> None:  # numpy order: the last is ggml's ne[0]
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.05).astype(np.float32))

    def ones(name: str, n: int) -> None:
        writer.add_tensor(name, np.ones(n, np.float32))

    random("v.patch_embd.weight", n_embd, 3, TINY_PATCH_SIZE, TINY_PATCH_SIZE)
    random("v.patch_embd.bias", n_embd)
    random("v.position_embd.weight", n_patches, n_embd)
    for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
        random(f"v.blk.0.{part}.weight", n_embd, n_embd)
        random(f"v.blk.0.{part}.bias", n_embd)
    for norm in ("ln1", "ln2"):
        ones(f"v.blk.0.{norm}.weight", n_embd)
        random(f"v.blk.0.{norm}.bias", n_embd)
    random("v.blk.0.ffn_up.weight", n_ff, n_embd)
    random("v.blk.0.ffn_up.bias", n_ff)
    random("v.blk.0.ffn_down.weight", n_embd, n_ff)
    random("v.blk.0.ffn_down.bias", n_embd)
    ones("v.post_ln.weight", n_embd)
    random("v.post_ln.bias", n_embd)
    random("mm.input_projection.weight", n_embd, text_embd)
    ones("mm.soft_emb_norm.weight", n_embd)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)


def tiny_png(width: int, height: int, *, seed: int = 0) -> bytes:
    """A valid 8-bit RGB PNG of `width`×`height` with a gradient (no image library needed)."""
    rows = []
    for y in range(height):
        row = bytearray(b"\0")  # filter type 0 for each scanline
        for x in range(width):
            row += bytes(((x * 7 + seed) % 256, (y * 5 + seed) % 256, 128))
        rows.append(bytes(row))
    return png_from_rows(width, height, b"".join(rows))


def png_from_rows(width: int, height: int, raw: bytes, *, declared: tuple[int, int] | None = None):
    """A PNG of filtered RGB rows; `declared` writes other dimensions into the header (a
    decompression bomb's claim) than the data holds."""
    w, h = declared or (width, height)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
