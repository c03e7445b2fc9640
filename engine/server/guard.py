"""The checks every request passes before any route sees it (a plain ASGI middleware):

- Host header: the name the client used must be this server's. A web page on evil.example can
  make a browser resolve evil.example to 127.0.0.1 (DNS rebinding) and then call a server on
  localhost with the browser's own network position; its requests still say
  `Host: evil.example`, and are refused. IP literals and `localhost` are always accepted (a
  rebinding attack needs a name it controls), other names only when listed.
- Origin: a browser names the page that makes a request in `Origin`, on every cross-origin
  request and on every POST. A page may send a "simple" request (`text/plain` or form data)
  without a CORS preflight, and the browser delivers it even though the page cannot read the
  answer; so an Origin that is neither this server's own nor listed with `--cors-origin` is
  refused here, on every route, before anything runs (403). Programs that are not browsers send
  no Origin and are not affected.
- Content type: the routes take JSON. A POST body that says `text/plain`, form data or anything
  else but JSON is refused (415), so no page can reach a route through a simple request even
  where an Origin is allowed. Ollama's own documentation uses `curl -d`, which says form data:
  that is taken under /api from programs (no Origin), as Ollama takes it.
- API key: when one is set, `Authorization: Bearer KEY` or Anthropic's `x-api-key: KEY`
  (compared in constant time).
- Body size: refused from Content-Length when it says too much, and counted as it arrives when
  it does not say (chunked bodies), so no request can fill memory. Bodies are small JSON, so the
  guard reads each whole before the routes run, within a time limit (408 past it), so a client
  sending a byte at a time cannot hold a connection.
- Body text: a lone UTF-16 surrogate escape (no character: it can be neither tokenized nor sent
  back) and NaN or Infinity used as a number (Python's decoder takes them, JSON has no such
  numbers, and no answer that echoes them can be written) are refused with 400.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import re

from engine.server.api_keys import SCOPE_KEY_NAME
from engine.server.config import ServerConfig, is_loopback
from engine.server.errors import error_bytes
from engine.untrusted_text import printable_line


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
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin.decode("latin-1"), host):
            shown = printable_line(origin.decode("latin-1"))[:100]
            await _refuse(
                send,
                path,
                403,
                f"Requests from the web page at {shown!r} are refused: a page may only call "
                "this server when its origin is listed. Start the server with --cors-origin "
                "ORIGIN to allow that page.",
            )
            return
        refusal = content_type_refusal(
            scope["method"], path, headers.get("content-type", b"").decode("latin-1"), origin
        )
        if refusal:
            await _refuse(send, path, 415, refusal)
            return
        preflight = scope["method"] == "OPTIONS" and self.config.cors_origins
        given = self.key_given(headers.get("authorization"), headers.get("x-api-key"))
        named = None if given else self.named_key(headers)
        if named is not None:
            scope[SCOPE_KEY_NAME] = named
        if self.key_needed() and not preflight and not given and named is None:
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
        deadline = asyncio.get_running_loop().time() + self.config.limits.body_seconds
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                seconds = self.config.limits.body_seconds
                await _refuse(
                    send,
                    path,
                    408,
                    f"The request body did not arrive within {seconds:g} s; send it whole.",
                )
                return
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
        if has_lone_surrogate(b"".join(chunks)):
            await _refuse(
                send,
                path,
                400,
                "The request holds a lone UTF-16 surrogate escape (\\ud800 to \\udfff without "
                "its pair), which is no character and cannot be sent back or tokenized; send "
                "valid Unicode text.",
            )
            return
        if has_non_finite_number(b"".join(chunks)):
            await _refuse(
                send,
                path,
                400,
                "The request holds NaN or Infinity as a number, which JSON has no numbers for "
                "(RFC 8259) and no answer could carry back; send finite numbers.",
            )
            return
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

    def origin_allowed(self, origin: str, host: str) -> bool:
        """This server's own pages (the /docs page: same scheme, name and port as the Host the
        request was sent to), and the origins listed; `null` (a file, a sandboxed frame) never."""
        origin = origin.strip()
        if origin in self.config.cors_origins:
            return True
        return bool(host) and origin.lower() in (
            f"http://{host.lower()}",
            f"https://{host.lower()}",
        )

    def key_needed(self) -> bool:
        """Whether requests must carry a key: one is set, named keys exist, or the server
        listens beyond this machine (where a store emptied by revoking lets nobody in)."""
        store = self.config.key_store
        named = store is not None and bool(store.listed())
        return bool(self._key) or named or (store is not None and not is_loopback(self.config.host))

    def named_key(self, headers: dict) -> str | None:
        """The name of the named key the request sent (Bearer or x-api-key), or None."""
        store = self.config.key_store
        if store is None:
            return None
        for token in (_bearer(headers.get("authorization")), headers.get("x-api-key")):
            if token:
                name = store.name_of(token.strip())
                if name is not None:
                    return name
        return None

    def key_given(self, authorization: bytes | None, x_api_key: bytes | None = None) -> bool:
        """`Authorization: Bearer KEY`, or `x-api-key: KEY` as Anthropic's clients send it."""
        if not self._key:  # none set: an empty token must not match it (named keys may exist)
            return False
        if x_api_key and hmac.compare_digest(x_api_key.strip(), self._key):
            return True
        if not authorization:
            return False
        scheme, _, token = authorization.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(token.strip(), self._key)


_JSON_TYPES = ("application/json",)
_BODY_METHODS = ("POST", "PUT", "PATCH")
_FORM = "application/x-www-form-urlencoded"


def _bearer(authorization: bytes | None) -> bytes | None:
    scheme, _, token = (authorization or b"").partition(b" ")
    return token if scheme.lower() == b"bearer" else None


def content_type_refusal(method: str, path: str, content_type: str, origin: bytes | None) -> str:
    """Why a request's body type is refused ("" when it is taken): bodies are JSON."""
    if method not in _BODY_METHODS:
        return ""
    media = content_type.split(";", 1)[0].strip().lower()
    if not media or media in _JSON_TYPES or _is_json_suffix(media):
        return ""
    if media == _FORM and path.startswith("/api/") and origin is None:
        return ""  # `curl -d`, as Ollama's documentation writes its examples
    return (
        f"This route takes a JSON body, and this one says {printable_line(media)[:80]!r}: send "
        "it with 'Content-Type: application/json'."
    )


# A JSON \uXXXX escape of a surrogate (its backslash not itself escaped), high then low when
# paired; a lone one decodes to a Python string that cannot be encoded as UTF-8 again.
_SURROGATE_ESCAPES = re.compile(
    rb"(?<!\\)(?:\\\\)*\\u([dD][89abAB][0-9a-fA-F]{2})(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?"
    rb"|(?<!\\)(?:\\\\)*\\u([dD][c-fC-F][0-9a-fA-F]{2})"
)


def _is_json_suffix(media: str) -> bool:
    return media.startswith("application/") and media.endswith("+json")


def has_lone_surrogate(body: bytes) -> bool:
    """Whether a JSON body escapes a surrogate that has no pair (raw surrogates cannot be in
    UTF-8 at all; JSON's decoder refuses those itself)."""
    if b"\\u" not in body:
        return False
    return any(match[3] or not match[2] for match in _SURROGATE_ESCAPES.finditer(body))


# NaN, Infinity or -Infinity where a JSON value starts (after ":", "[" or ","): the only places
# Python's decoder reads them as numbers. Inside a string (base64 image data, a message's text)
# the same letters follow other characters, or are confirmed as text by the strict parse below.
_NON_FINITE_VALUE = re.compile(rb"[:\[,]\s*-?(?:NaN|Infinity)")


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str):
    raise _NonFinite(name)


def has_non_finite_number(body: bytes) -> bool:
    """Whether a JSON body uses NaN, Infinity or -Infinity as a number. Python's decoder (and so
    every route) takes them though JSON has no such numbers, and a route that sends a field
    back (the Responses API echoes `text` and `metadata`) then cannot write its answer. The
    whole body is parsed strictly only where such a word follows a value's opening."""
    if not _NON_FINITE_VALUE.search(body):
        return False
    try:
        json.loads(body, parse_constant=_refuse_constant)
    except _NonFinite:
        return True
    except (ValueError, UnicodeDecodeError):  # no JSON at all: the route says so
        return False
    return False


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
