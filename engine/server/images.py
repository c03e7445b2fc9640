"""Images in API requests: OpenAI's `image_url` content parts and Ollama's `images`, as the
engine's base64 images, each checked before anything decodes it (engine/chat/images.py).

OpenAI's parts carry a data: URL (`data:image/png;base64,...`) or an http(s) URL. A remote URL
is never fetched unless the server was started allowing it (`--allow-remote-images`): fetching
would let anyone who can reach the API make this machine open connections to any address,
its own network's included. When allowed, a fetch is bounded in time and bytes.
Every refusal is a 4xx saying what to send instead.
"""

from __future__ import annotations

import base64
import urllib.request
from collections.abc import Callable

from engine.chat.images import (
    MAX_IMAGE_BYTES,
    ImageRefused,
    ImagesTooLarge,
    check_images,
    decode_base64_image,
    decode_data_url,
)
from engine.runtime import protocol as p
from engine.runtime.engine_api import NO_PROJECTOR
from engine.server.errors import APIError

FETCH_SECONDS = 10.0

Fetch = Callable[[str], bytes]

REMOTE_REFUSED = (
    "Remote images are not fetched: send the image itself as a data: URL "
    "(data:image/png;base64,...). The server fetches http(s) image URLs only when started "
    "with --allow-remote-images."
)


def image_of_part(image_url: object, param: str, fetch: Fetch | None) -> bytes:
    """The bytes of one OpenAI `image_url` part (`{"url": ..., "detail": ...}` or a bare URL)."""
    url = image_url.get("url") if isinstance(image_url, dict) else image_url
    if not isinstance(url, str) or not url:
        raise APIError(400, "An image_url part needs a url.", param=param)
    scheme = url[:8].lower()
    try:
        if scheme.startswith("data:"):
            return decode_data_url(url)
        if scheme.startswith(("http://", "https://")):
            if fetch is None:
                raise APIError(400, REMOTE_REFUSED, param=param)
            return fetch(url)
        raise ImageRefused("An image URL must be a data: URL (data:image/png;base64,...).")
    except ImageRefused as exc:
        raise APIError(400, str(exc), param=param) from None


def image_of_base64(text: object, param: str) -> bytes:
    """One of Ollama's `images`: base64 of the file (a data: URL is taken too)."""
    if not isinstance(text, str):
        raise APIError(400, "An image must be a base64 string.", param=param)
    try:
        if text[:5].lower() == "data:":
            return decode_data_url(text)
        return decode_base64_image(text)
    except ImageRefused as exc:
        raise APIError(400, str(exc), param=param) from None


def engine_images(per_message: list[list[bytes]], model: p.ModelLoaded) -> list[tuple[str, ...]]:
    """Each message's images as the engine takes them (base64), after the request's limits
    (count, size, pixels: 413 for too much, 400 for what is not an image) and the model's
    projector (400 saying what to do when it has none)."""
    every = [image for images in per_message for image in images]
    if not every:
        return [() for _ in per_message]
    if not model.vision:
        raise APIError(400, NO_PROJECTOR, param="messages")
    try:
        check_images(every)
    except ImageRefused as exc:
        status = 413 if isinstance(exc, ImagesTooLarge) else 400
        raise APIError(status, str(exc), param="messages") from None
    return [tuple(base64.b64encode(i).decode("ascii") for i in images) for images in per_message]


def fetch_remote_image(url: str) -> bytes:
    """GET an http(s) image, at most MAX_IMAGE_BYTES and FETCH_SECONDS (only when allowed)."""
    request = urllib.request.Request(url, headers={"User-Agent": "hearth-server"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_SECONDS) as response:
            data = response.read(MAX_IMAGE_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise ImageRefused(f"The image at {url[:200]} could not be fetched ({exc}).") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRefused(
            f"The image at {url[:200]} is over {MAX_IMAGE_BYTES // 2**20} MiB; send a smaller one."
        )
    return data
