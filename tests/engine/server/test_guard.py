"""The request guard's checks as a table: Host names, keys."""

import pytest

from engine.server.config import ServerConfig
from engine.server.guard import RequestGuard

KEY = "secret-key-0123456789"


@pytest.fixture
def guard():
    return RequestGuard(None, ServerConfig(api_key=KEY, allowed_hosts=("hearth.lan",)))


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8741", True), ("localhost:8741", True), ("LOCALHOST", True),
        ("[::1]:8741", True), ("192.168.0.7:8741", True), ("hearth.lan:8741", True),
        ("evil.example", False), ("evil.example:8741", False), ("localhost.evil.example", False),
        ("127.0.0.1.evil.example", False), ("", False), ("[::1", False),
    ],
)  # fmt: skip
def test_host_names(guard, host, allowed):
    assert guard.host_allowed(host) is allowed


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        (f"Bearer {KEY}".encode(), True), (f"bearer {KEY}".encode(), True),
        (b"Bearer wrong", False), (f"Basic {KEY}".encode(), False), (KEY.encode(), False),
        (None, False), (b"", False), (f"Bearer {KEY}x".encode(), False),
    ],
)  # fmt: skip
def test_keys(guard, header, accepted):
    assert guard.key_given(header) is accepted


@pytest.mark.parametrize(
    ("x_api_key", "accepted"),
    [(KEY.encode(), True), (f" {KEY} ".encode(), True), (b"wrong", False), (b"", False),
     (f"Bearer {KEY}".encode(), False)],
)  # fmt: skip
def test_anthropic_clients_send_the_key_as_x_api_key(guard, x_api_key, accepted):
    assert guard.key_given(None, x_api_key) is accepted
