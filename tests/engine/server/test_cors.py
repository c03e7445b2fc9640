"""CORS only for the origins listed, driven through the ASGI app directly (no engine needed)."""

import asyncio

from engine.server.app import create_app
from engine.server.config import ServerConfig
from engine.server.server_state import ServerState

ALLOWED = "http://localhost:3000"


class _NoEngine:
    model = None
    crashed = None
    restarting = False
    template_note = ""


def _call(config: ServerConfig, method: str, headers: dict[str, str]) -> tuple[int, dict]:
    app = create_app(ServerState(link=_NoEngine(), config=config))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": "/api/version", "raw_path": b"/api/version",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8741),
        "headers": [(k.lower().encode(), v.encode()) for k, v in
                    {"host": "127.0.0.1:8741", **headers}.items()],
    }  # fmt: skip
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}


def test_a_listed_origin_gets_cors_headers_and_its_preflight_answered():
    config = ServerConfig(cors_origins=(ALLOWED,))
    status, headers = _call(config, "GET", {"origin": ALLOWED})
    assert status == 200 and headers["access-control-allow-origin"] == ALLOWED
    status, headers = _call(
        config, "OPTIONS", {"origin": ALLOWED, "access-control-request-method": "POST"}
    )
    assert status == 200 and headers["access-control-allow-origin"] == ALLOWED


def test_an_unlisted_origin_is_refused_with_no_cors_headers():
    config = ServerConfig(cors_origins=(ALLOWED,))
    status, headers = _call(config, "GET", {"origin": "http://evil.example"})
    assert status == 403 and "access-control-allow-origin" not in headers
    status, headers = _call(
        config,
        "OPTIONS",
        {"origin": "http://evil.example", "access-control-request-method": "POST"},
    )
    assert status == 403 and "access-control-allow-origin" not in headers


def test_without_listed_origins_a_page_is_refused_and_no_response_carries_cors_headers():
    status, headers = _call(ServerConfig(), "GET", {"origin": ALLOWED})
    assert status == 403 and not any(k.startswith("access-control") for k in headers)
    status, headers = _call(ServerConfig(), "GET", {})  # a program (no Origin): served
    assert status == 200 and not any(k.startswith("access-control") for k in headers)


def test_a_preflight_needs_no_key_but_the_request_does():
    config = ServerConfig(cors_origins=(ALLOWED,), api_key="k" * 20)
    status, _ = _call(
        config, "OPTIONS", {"origin": ALLOWED, "access-control-request-method": "GET"}
    )
    assert status == 200
    status, _ = _call(config, "GET", {"origin": ALLOWED})
    assert status == 401
    status, _ = _call(config, "GET", {"origin": ALLOWED, "authorization": "Bearer " + "k" * 20})
    assert status == 200
