"""The checks every request passes before any route sees it (a plain ASGI middleware):

- Host header: the name the client used must be this server's. A web page on evil.example can
  make a browser resolve evil.example to 127.0.0.1 (DNS rebinding) and then call a server on
  localhost with the browser's own network position; its requests still say
  `Host: evil.example`, and are refused. IP literals and `localhost` are always accepted (a
  rebinding attack needs a name it controls), other names only when listed.
- API key: when one is set, `Authorization: Bearer KEY` or Anthropic's `x-api-key: KEY`
  (compared in constant time).
- Body size: refused from Content-Length when it says too much, and counted as it arrives when
  it does not say (chunked bodies), so no request can fill memory. Bodies are small JSON, so the
  guard reads each whole before the routes run.
"""

from __future__ import annotations

import hmac
import ipaddress

from engine.server.config import ServerConfig
from engine.server.errors import error_bytes


class RequestGuard:
    def __init__(self, app, config: ServerConfig):
        self.app = app
        self.config = config
        self._hosts = {"localhost", *(h.lower() for h in config.allowed_hosts)}
        self._key = config.api_key.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        path = scope.get("path", "")
        host = headers.get("host", b"").decode("latin-1")
        if not self.host_allowed(host):
            await _refuse(
                send,
                path,
                400,
                f"Host {host!r} is not this server's name. Call it "
                "by its address (127.0.0.1), or start it with --allowed-host NAME.",
            )
            return
        preflight = scope["method"] == "OPTIONS" and self.config.cors_origins
        given = self.key_given(headers.get("authorization"), headers.get("x-api-key"))
        if self._key and not preflight and not given:
            await _refuse(
                send,
                path,
                401,
                "This server needs an API key: send the header "
                "'Authorization: Bearer KEY' with the key set in Hearth.",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        limit = self.config.limits.max_body_bytes
        length = headers.get("content-length")
        if length is not None:
            try:
                too_big = int(length) > limit
            except ValueError:
                await _refuse(send, path, 400, "The Content-Length header is not a number.")
                return
            if too_big:
                await _refuse(send, path, 413, _too_large(limit))
                return
        await self._run_bounded(scope, receive, send, limit, path)

    async def _run_bounded(self, scope, receive, send, limit: int, path: str) -> None:
        """Read the whole body first, counting: a body without a length (chunked) is refused
        with 413 as soon as it passes the limit, and the app never sees a part of it."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse(send, path, 413, _too_large(limit))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body_sent = False

        async def replay():
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    def host_allowed(self, host: str) -> bool:
        name = _strip_port(host).lower()
        if not name:
            return False
        if name in self._hosts:
            return True
        try:
            ipaddress.ip_address(name.strip("[]"))
            return True
        except ValueError:
            return False

    def key_given(self, authorization: bytes | None, x_api_key: bytes | None = None) -> bool:
        """`Authorization: Bearer KEY`, or `x-api-key: KEY` as Anthropic's clients send it."""
        if x_api_key and hmac.compare_digest(x_api_key.strip(), self._key):
            return True
        if not authorization:
            return False
        scheme, _, token = authorization.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(token.strip(), self._key)


def _strip_port(host: str) -> str:
    if host.startswith("["):  # [::1]:8741; without its "]" it is no address at all
        return host[: host.find("]") + 1] if "]" in host else ""
    name, _, port = host.rpartition(":")
    return name if name and port.isdigit() else host


def _too_large(limit: int) -> str:
    return f"The request body is over the server's limit of {limit // 1024} KiB; send less."


async def _refuse(send, path: str, status: int, message: str, extra_headers=()) -> None:
    body = error_bytes(path, status, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
