"""Hostile and broken requests to a running `hearth serve`: each gets a clear 4xx answer, and
the server goes on serving."""

import http.client
import json
import socket
import subprocess
import sys

import pytest

from engine.server.config import Limits
from tests.engine.server.conftest import REPO

CHAT = "/v1/chat/completions"
HELLO = [{"role": "user", "content": "Hi"}]


def _message(reply) -> str:
    error = reply["error"]
    return error if isinstance(error, str) else error["message"]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"messages": HELLO, "max_tokens": -1}, 400, "at least 1"),
        ({"messages": HELLO, "max_tokens": 10**9}, 400, "at most"),
        ({"messages": HELLO, "max_completion_tokens": 0}, 400, "at least 1"),
        ({"messages": HELLO, "n": 1000}, 400, "between 1 and"),
        ({"messages": HELLO, "temperature": -3}, 400, "temperature"),
        ({"messages": HELLO, "top_logprobs": 99, "logprobs": True}, 400, "top_logprobs"),
        ({"messages": HELLO, "stop": ["x"] * 100}, 400, "stop strings"),
        ({"messages": []}, 400, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "role"),
        ({"model": "../../../../etc/passwd", "messages": HELLO}, 404, "not loaded"),
        ({"model": "/etc/passwd", "messages": HELLO}, 404, "not loaded"),
        ({"model": "C:\\Windows\\win.ini", "messages": HELLO}, 404, "not loaded"),
        ({"messages": HELLO, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "array", "minItems": 10**9}}}}, 400, "minItems"),
        ({"messages": HELLO, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"$ref": "https://example.com/s.json"}}}}, 400, "refers"),
        ({"messages": HELLO, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "no-such-type"}}}}, 400, "schema"),
        ({"messages": HELLO, "response_format": {"type": "xml"}}, 400, "not supported"),
        ({"messages": HELLO, "tools": [{"type": "function", "function": {"name": "a b"}}],
          "tool_choice": "required"}, 400, "name"),
        ({"messages": HELLO, "tools": [{"type": "function", "function": {"name": "f"}}],
          "tool_choice": {"type": "function", "function": {"name": "g"}}}, 400, "not among"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "needs a url"),
        ({"messages": [{"role": "user", "content": [{"type": "file"}]}]}, 400, "image_url parts"),
    ],
)  # fmt: skip
def test_bad_parameters_get_a_clear_400(served, body, status, says):
    got, reply = served.request("POST", CHAT, body)
    assert got == status, reply
    assert says in _message(reply)


@pytest.mark.parametrize(
    ("body", "says"),
    [({"input": []}, "inputs"), ({"input": ["x"] * 65}, "inputs"), ({"input": [""]}, "empty"),
     ({"input": "x", "encoding_format": "hex"}, "encoding_format")],
)  # fmt: skip
def test_bad_embedding_requests_get_400(served, body, says):
    status, reply = served.request("POST", "/v1/embeddings", body)
    assert status == 400 and says in _message(reply)


def test_malformed_json_gets_400(served):
    status, reply = served.request("POST", CHAT, '{"messages": [')
    assert status == 400 and "not valid JSON" in _message(reply)


def test_a_body_past_the_limit_gets_413(served):
    over = Limits().max_body_bytes + 1024 * 1024
    huge = json.dumps({"messages": [{"role": "user", "content": "a" * over}]})
    status, reply = served.request("POST", CHAT, huge)
    assert status == 413 and "limit" in _message(reply)


def test_a_chunked_body_past_the_limit_gets_413(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(
            f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {served.key}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        chunk = b"a" * 65536
        try:
            for _ in range(Limits().max_body_bytes // len(chunk) + 16):  # past the limit
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass  # the server closed the connection after answering
        answer = sock.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 413")


def test_a_prompt_longer_than_a_sequence_gets_400(served):
    status, reply = served.request(
        "POST", CHAT, {"messages": [{"role": "user", "content": "word " * 2000}]}
    )
    assert status == 400 and "context" in _message(reply)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "localhost.evil.example"])
def test_a_host_header_naming_another_site_is_refused(served, host):
    status, reply = served.request("GET", "/v1/models", headers={"Host": host})
    assert status == 400 and "not this server's name" in _message(reply)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_its_own_names_pass_the_host_check(served, host):
    status, _ = served.request("GET", "/v1/models", headers={"Host": f"{host}:{served.port}"})
    assert status == 200


@pytest.mark.parametrize("auth", [None, "Bearer wrong-key-0000000000", "Basic dXNlcjpwYXNz"])
def test_a_missing_or_wrong_key_gets_401(served, auth):
    status, reply = served.request("GET", "/v1/models", headers={"Authorization": auth})
    assert status == 401 and "API key" in _message(reply)


def test_no_cors_headers_unless_origins_are_listed(served):
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.request(
        "OPTIONS",
        CHAT,
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.getheader("access-control-allow-origin") is None
    assert response.status == 403
    status, reply = served.request("GET", "/v1/models", headers={"Origin": "http://evil.example"})
    assert status == 403 and "--cors-origin" in _message(reply)


def test_an_unknown_route_gets_404_in_openais_shape(served):
    status, reply = served.request("GET", "/v1/files")
    assert status == 404 and reply["error"]["type"] == "not_found_error"


def test_the_server_still_serves_after_all_that(served):
    status, reply = served.request("POST", CHAT, {"messages": HELLO, "max_tokens": 4})
    assert status == 200 and reply["usage"]["completion_tokens"] > 0


def test_serve_refuses_to_listen_off_loopback_without_a_key():
    env_free = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HEARTH_API_KEY": ""}
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())",
         "serve", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True, text=True, timeout=60, env=env_free, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 2
    assert "needs an API key" in run.stderr
