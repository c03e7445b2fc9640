"""Server settings: safe by default, and refused where they would not be."""

import pytest

from engine.server.config import ServerConfig, ServerConfigError, is_loopback

KEY = "k" * 24


def test_the_default_listens_on_loopback_without_a_key():
    config = ServerConfig().check()
    assert config.host == "127.0.0.1" and not config.api_key and not config.cors_origins
    assert config.base_url == f"http://127.0.0.1:{config.port}/v1"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "my-laptop.local"])
def test_any_other_address_needs_a_key(host):
    with pytest.raises(ServerConfigError, match="needs an API key"):
        ServerConfig(host=host).check()
    assert ServerConfig(host=host, api_key=KEY).check().api_key == KEY


def test_a_short_key_is_refused():
    with pytest.raises(ServerConfigError, match="too short"):
        ServerConfig(host="0.0.0.0", api_key="1234").check()


@pytest.mark.parametrize("origin", ["*", "evil.example", "file://x"])
def test_cors_takes_exact_web_origins_only(origin):
    with pytest.raises(ServerConfigError, match="CORS origin"):
        ServerConfig(cors_origins=(origin,)).check()
    ServerConfig(cors_origins=("http://localhost:3000",)).check()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.9.9.9", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("10.0.0.1", False), ("example.com", False)],
)  # fmt: skip
def test_loopback_addresses(host, loopback):
    assert is_loopback(host) is loopback


def test_the_base_url_of_an_any_address_server_points_at_loopback():
    assert ServerConfig(host="0.0.0.0", port=9000, api_key=KEY).base_url == (
        "http://127.0.0.1:9000/v1"
    )
