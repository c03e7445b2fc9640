"""What the API server listens on and what it accepts: small frozen settings, checked once.

Safe by default: loopback only, no CORS. Listening on any other address needs an API key,
because anyone on the network could otherwise use the model (and the machine's GPU).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8741


class ServerConfigError(ValueError):
    """Settings the server cannot start with; the message says which and what to do."""


@dataclass(frozen=True)
class Limits:
    """Bounds on every request, so that no request can take the server for itself."""

    # Images travel inside the body as base64 (8 MiB of images become 10.7 MiB); the worker's
    # frames carry 16 MiB (engine/runtime/protocol.py).
    max_body_bytes: int = 14 * 1024 * 1024
    max_tokens: int = 8192  # the most a request may ask for
    default_max_tokens: int = 1024  # when a request does not say
    max_n: int = 4  # choices per request
    max_stop_strings: int = 8
    max_stop_chars: int = 200
    max_top_logprobs: int = 20
    max_tools: int = 64
    max_messages: int = 1024
    max_embedding_inputs: int = 64
    request_seconds: float = 600.0  # a generation still running after this is stopped
    # A reply that has begun but brings no new token for this long is stopped (504): a grammar
    # can make llama.cpp's sampler search for minutes inside one call.
    token_seconds: float = 60.0
    # A worker that has not ended a stopped generation after this long is stuck inside one
    # C call; it is killed, and the server loads the model again. Generous: the worker honours
    # a stop between steps, and one step (another request's prompt, on a slow CPU) may rightly
    # take tens of seconds.
    stop_grace_seconds: float = 60.0
    header_seconds: float = 10.0  # a connection must send its request's headers in this time
    body_seconds: float = 30.0  # and its whole body in this (14 MiB at 480 KiB/s)
    max_connections: int = 512  # open connections at once; past it, 503
    shutdown_seconds: float = 3.0  # Ctrl+C (or Stop) waits this long for running requests
    queue_length: int = 32  # requests waiting for a sequence, beyond those decoding
    retry_after_seconds: int = 2


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str = ""  # empty: no key asked (allowed on loopback only)
    cors_origins: tuple[str, ...] = ()  # browser origins allowed to call; empty: no CORS
    allowed_hosts: tuple[str, ...] = ()  # extra names the Host header may carry
    # Named keys (api_keys.KeyStore): any of them is taken besides `api_key`; while it holds
    # keys, every request needs one.
    key_store: Any = None
    # Fetch http(s) image URLs in chat requests (off: only data: URLs are taken; fetching lets
    # a caller make this machine connect anywhere, its own network included).
    fetch_remote_images: bool = False
    limits: Limits = field(default_factory=Limits)

    def check(self) -> ServerConfig:
        """Return self, or raise ServerConfigError for settings that would be unsafe."""
        if not 0 < self.port < 65536:
            raise ServerConfigError(f"Port {self.port} is not a TCP port; use 1-65535.")
        named_keys = self.key_store is not None and self.key_store.listed()
        if not is_loopback(self.host) and not self.api_key and not named_keys:
            raise ServerConfigError(
                f"Listening on {self.host} lets other machines reach the model, so it needs an "
                "API key: set one (--api-key or HEARTH_API_KEY, or create one with `hearth keys "
                "create NAME`), or listen on 127.0.0.1."
            )
        if self.api_key and len(self.api_key) < 16:
            raise ServerConfigError("The API key is too short to be safe; use 16 characters+.")
        for origin in self.cors_origins:
            if origin == "*" or not origin.startswith(("http://", "https://")):
                raise ServerConfigError(
                    f"CORS origin {origin!r} is not allowed: list exact origins such as "
                    "http://localhost:3000 (a wildcard would let any web page use the model)."
                )
        return self

    @property
    def base_url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
