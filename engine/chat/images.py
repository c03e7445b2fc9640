"""Images in a conversation: what a file claims to be, read from its header before anything
decodes it, and the limits every way in (the window, the API) holds images to.

A decompression bomb is a small file whose header claims a huge picture (a 50 KB PNG of
60,000 × 60,000 pixels asks the decoder for 10 GB): the dimensions are read here from the
header's first bytes, and an image over the limits is refused with the reason before llama.cpp's
decoder (stb_image, inside mtmd) ever sees it. Only the formats that decoder reads are taken:
PNG, JPEG, GIF (its first frame) and BMP; a WebP or HEIC is refused with what to do. Pure.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass

MAX_IMAGE_BYTES = 8 * 1024 * 1024  # one image's file; the worker's frames carry 16 MiB
MAX_IMAGES_BYTES = 10 * 1024 * 1024  # all images of one request together
MAX_IMAGES = 8  # images in one request
MAX_SIDE = 8192  # pixels, either side
MAX_PIXELS = 40_000_000  # 40 megapixels: 160 MB of RGBA once decoded, the most we let through

FORMATS = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "bmp": "image/bmp"}
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w.+-]+=[\w.+-]+)*)"
                       r"(?P<b64>;base64)?,", re.IGNORECASE)  # fmt: skip


class ImageRefused(ValueError):
    """An image that is not taken; the message says why and what to do."""


class ImagesTooLarge(ImageRefused):
    """Too many bytes or too many images (an API answers 413 rather than 400)."""


@dataclass(frozen=True)
class ImageFacts:
    mime_type: str
    width: int
    height: int
    n_bytes: int


def image_facts(data: bytes) -> ImageFacts:
    """The format and size an image's header declares; ImageRefused for anything else."""
    fmt, size = _sniff(data)
    if fmt is None:
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            raise ImageRefused(
                "WebP images cannot be read by the engine's image decoder; convert it to PNG "
                "or JPEG and send it again."
            )
        raise ImageRefused(
            "This is not an image the engine can read (PNG, JPEG, GIF or BMP); convert it to "
            "PNG or JPEG and send it again."
        )
    if size is None:
        raise ImageRefused(f"The {fmt.upper()} image is damaged: its size cannot be read.")
    width, height = size
    return ImageFacts(FORMATS[fmt], width, height, len(data))


def check_image(data: bytes) -> ImageFacts:
    """`image_facts`, then the limits: bytes, sides and pixels, each refused with its figure."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ImagesTooLarge(
            f"The image is {len(data) / 2**20:.1f} MiB; images of at most "
            f"{MAX_IMAGE_BYTES // 2**20} MiB are taken. Send a smaller or more compressed one."
        )
    facts = image_facts(data)
    w, h = facts.width, facts.height
    if w < 1 or h < 1:
        raise ImageRefused(f"The image says it is {w}×{h} pixels; it is damaged.")
    if w > MAX_SIDE or h > MAX_SIDE or w * h > MAX_PIXELS:
        raise ImageRefused(
            f"The image is {w:,}×{h:,} pixels; at most {MAX_SIDE:,} a side and "
            f"{MAX_PIXELS // 1_000_000} megapixels are taken. Scale it down and send it again."
        )
    return facts


def check_images(images: list[bytes]) -> list[ImageFacts]:
    """Every image of one request, and the request's own limits (count, bytes together)."""
    if len(images) > MAX_IMAGES:
        raise ImagesTooLarge(
            f"{len(images)} images in one request; at most {MAX_IMAGES} are taken. "
            "Send fewer images."
        )
    total = sum(len(d) for d in images)
    if total > MAX_IMAGES_BYTES:
        raise ImagesTooLarge(
            f"The images come to {total / 2**20:.1f} MiB; at most "
            f"{MAX_IMAGES_BYTES // 2**20} MiB in one request. Send fewer or smaller images."
        )
    return [check_image(d) for d in images]


def decode_base64_image(text: str, *, what: str = "The image") -> bytes:
    """Base64 (standard alphabet, padding optional) to bytes, its length checked first."""
    if len(text) > (MAX_IMAGE_BYTES * 4) // 3 + 8:
        raise ImagesTooLarge(
            f"{what} is over {MAX_IMAGE_BYTES // 2**20} MiB; send a smaller or more compressed one."
        )
    cleaned = "".join(text.split())
    try:
        return base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ImageRefused(f"{what} is not valid base64.") from None


def decode_data_url(url: str) -> bytes:
    """A `data:image/...;base64,...` URL's bytes. Any other URL is refused here: fetching a
    remote image is the caller's decision (the server refuses http(s) unless allowed)."""
    match = _DATA_URL.match(url[:256])
    if not match:
        raise ImageRefused("An image URL must be a data: URL (data:image/png;base64,...).")
    if not match["b64"]:
        raise ImageRefused("An image data: URL must be base64-encoded (…;base64,…).")
    return decode_base64_image(url[match.end() :], what="The image in the data: URL")


def _sniff(data: bytes) -> tuple[str | None, tuple[int, int] | None]:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        if len(data) >= 24 and data[12:16] == b"IHDR":
            return "png", struct.unpack(">II", data[16:24])
        return "png", None
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif", struct.unpack("<HH", data[6:10]) if len(data) >= 10 else None
    if data[:2] == b"BM":
        if len(data) >= 26:
            w, h = struct.unpack("<ii", data[18:26])
            return "bmp", (w, abs(h))  # a negative height: rows stored top-down
        return "bmp", None
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg", _jpeg_size(data)
    return None, None


# Start-of-frame markers carry the size; C4 (Huffman tables), C8 and CC (arithmetic coding
# conditioning) share the range but are not frames.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Walk the JPEG's marker segments to its frame header: (width, height), or None."""
    i = 2
    n = len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill bytes before a marker
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length follows
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if length < 2:
            return None
        if marker in _JPEG_SOF:
            if i + 9 > n:
                return None
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        if marker == 0xDA:  # start of scan before any frame header: not a valid JPEG
            return None
        i += 2 + length
    return None
