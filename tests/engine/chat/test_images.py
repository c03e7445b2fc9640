"""Images' headers read before any decoding, and the limits on them (decompression bombs)."""

from __future__ import annotations

import base64
import struct

import pytest

from engine.chat.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    ImageRefused,
    check_image,
    check_images,
    decode_base64_image,
    decode_data_url,
    image_facts,
)
from testkit.tiny_vision import png_from_rows, tiny_png


def _jpeg(width: int, height: int, *, app_segment: bytes = b"JFIF\0") -> bytes:
    app = b"\xff\xe0" + struct.pack(">H", len(app_segment) + 2) + app_segment
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app + sof + b"\xff\xda\x00\x02" + b"\xff\xd9"


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\0" * 20


def _bmp(width: int, height: int) -> bytes:
    return b"BM" + b"\0" * 16 + struct.pack("<ii", width, height) + b"\0" * 30


@pytest.mark.parametrize(
    "data, mime, size",
    [
        (tiny_png(40, 30), "image/png", (40, 30)),
        (_jpeg(640, 480), "image/jpeg", (640, 480)),
        (b"\xff\xd8\xff\xff" + _jpeg(10, 20)[2:], "image/jpeg", (10, 20)),  # a fill byte
        (_gif(7, 9), "image/gif", (7, 9)),
        (_bmp(5, -6), "image/bmp", (5, 6)),  # top-down rows
    ],
)
def test_formats_and_sizes(data, mime, size):
    facts = image_facts(data)
    assert (facts.mime_type, (facts.width, facts.height)) == (mime, size)


@pytest.mark.parametrize(
    "data, words",
    [
        (b"RIFF\0\0\0\0WEBPVP8 ", "WebP"),
        (b"%PDF-1.7", "not an image"),
        (b"", "not an image"),
        (b"\x89PNG\r\n\x1a\n\0\0", "damaged"),
        (b"\xff\xd8\xff\xda\x00\x02", "damaged"),  # scan before any frame header
        (_jpeg(10, 10)[:12], "damaged"),  # cut short
    ],
)
def test_unreadable_images_say_why(data, words):
    with pytest.raises(ImageRefused, match=words):
        image_facts(data)


@pytest.mark.parametrize(
    "data, words",
    [
        # a bomb: 40x30 pixels of data, 60,000 x 60,000 claimed in the header
        (png_from_rows(1, 1, b"\0\0\0\0", declared=(60_000, 60_000)), "60,000×60,000"),
        (_jpeg(8193, 10), "8,193×10"),
        (_jpeg(8000, 8000), "megapixels"),
        (_gif(0, 10), "damaged"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * MAX_IMAGE_BYTES, "MiB"),
    ],
)
def test_limits(data, words):
    with pytest.raises(ImageRefused, match=words):
        check_image(data)


def test_request_limits():
    png = tiny_png(4, 4)
    assert len(check_images([png] * MAX_IMAGES)) == MAX_IMAGES
    with pytest.raises(ImageRefused, match="at most 8"):
        check_images([png] * (MAX_IMAGES + 1))
    big = png_from_rows(1, 1, b"\0\0\0\0") + b"\0" * (6 * 2**20)
    with pytest.raises(ImageRefused, match="in one request"):
        check_images([big, big])


@pytest.mark.parametrize(
    "url, ok",
    [
        ("data:image/png;base64," + base64.b64encode(b"abc").decode(), True),
        ("data:image/png;charset=x;base64," + base64.b64encode(b"abc").decode(), True),
        ("data:image/png;base64,YWJj\n", True),  # whitespace, no padding needed
        ("data:image/png;base64,YW", True),  # padding left off
        ("data:image/png,abc", False),  # not base64
        ("data:image/png;base64,!!!!", False),
        ("https://example.com/cat.png", False),
        ("file:///etc/passwd", False),
    ],
)
def test_data_urls(url, ok):
    if ok:
        assert decode_data_url(url)[:2] in (b"ab", b"a")
    else:
        with pytest.raises(ImageRefused):
            decode_data_url(url)


def test_base64_length_is_checked_before_decoding():
    with pytest.raises(ImageRefused, match="over 8 MiB"):
        decode_base64_image("A" * (MAX_IMAGE_BYTES * 2))
