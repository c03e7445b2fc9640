"""Named API keys (engine/server/api_keys.py): kept hashed, taken by the guard beside the one
--api-key, revoked from the next request on, and counted per name in the request log."""

from __future__ import annotations

import os
import stat

import pytest

from engine.server.api_keys import KeyStore, KeyStoreError, key_hash
from engine.server.config import ServerConfig, ServerConfigError
from tests.engine.server.stand_in import StandInLink, app_with, call

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}


def test_the_file_holds_hashes_never_the_keys(tmp_path):
    store = KeyStore(tmp_path / "keys.json")
    key = store.create("laptop")
    text = (tmp_path / "keys.json").read_text()
    assert key not in text and key[8:] not in text and key_hash(key) in text
    assert stat.S_IMODE(os.stat(tmp_path / "keys.json").st_mode) == 0o600
    assert [(k.name, k.shown) for k in store.listed()] == [("laptop", key[:7] + "…")]
    assert store.name_of(key.encode()) == "laptop" and store.name_of(b"hk-guess") is None


def test_names_are_checked_and_unique(tmp_path):
    store = KeyStore(tmp_path / "keys.json")
    store.create("zed")
    for bad in ("", "a\nb", "x" * 65, "zed"):
        with pytest.raises(KeyStoreError):
            store.create(bad)
    with pytest.raises(KeyStoreError, match="no key named"):
        store.revoke("vim")


def test_another_process_revoking_a_key_is_seen_at_once(tmp_path):
    server_side, other = KeyStore(tmp_path / "keys.json"), KeyStore(tmp_path / "keys.json")
    key = other.create("phone")
    assert server_side.name_of(key.encode()) == "phone"
    other.revoke("phone")
    assert server_side.name_of(key.encode()) is None


def test_a_foreign_or_broken_file_lets_nobody_in(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text('{"keys": [{"name": "x", "sha256": ""}]}')
    assert KeyStore(path).listed() == () and KeyStore(path).name_of(b"") is None
    path.write_text("not json")
    assert KeyStore(path).listed() == ()


def test_requests_need_a_named_key_and_are_counted_by_its_name(tmp_path):
    store = KeyStore(tmp_path / "keys.json")
    laptop, zed = store.create("laptop"), store.create("zed")
    app = app_with(StandInLink(), ServerConfig(key_store=store))
    sent = [({"Authorization": f"Bearer {laptop}"}, 200), ({"x-api-key": zed}, 200),
            ({"Authorization": f"Bearer {laptop}"}, 200), ({}, 401),
            ({"Authorization": "Bearer "}, 401),
            ({"Authorization": "Bearer hk-wrong"}, 401)]  # fmt: skip
    for headers, status in sent:
        assert call(app, "POST", "/v1/chat/completions", CHAT, headers)[0] == status
    log = app.state.hearth.log
    assert log.counts_by_key() == {"laptop": 2, "zed": 1}
    assert [r.key for r in log.records()] == ["laptop", "zed", "laptop"]
    assert "[zed]" in log.records()[1].line()
    store.revoke("zed")
    assert call(app, "POST", "/v1/chat/completions", CHAT, {"x-api-key": zed})[0] == 401


def test_without_named_keys_loopback_needs_none_and_the_one_key_still_works(tmp_path):
    store = KeyStore(tmp_path / "keys.json")
    app = app_with(StandInLink(), ServerConfig(key_store=store))
    assert call(app, "POST", "/v1/chat/completions", CHAT)[0] == 200
    both = app_with(StandInLink(), ServerConfig(api_key="k" * 20, key_store=store))
    named = store.create("ci")
    assert call(both, "POST", "/v1/chat/completions", CHAT, {"x-api-key": "k" * 20})[0] == 200
    assert call(both, "POST", "/v1/chat/completions", CHAT, {"x-api-key": named})[0] == 200


def test_listening_beyond_loopback_takes_named_keys_instead_of_one(tmp_path):
    store = KeyStore(tmp_path / "keys.json")
    with pytest.raises(ServerConfigError, match="hearth keys create"):
        ServerConfig(host="0.0.0.0", key_store=store).check()
    store.create("lan")
    ServerConfig(host="0.0.0.0", key_store=store).check()
    app = app_with(StandInLink(), ServerConfig(host="0.0.0.0", key_store=store))
    store.revoke("lan")  # the last key gone: nobody, rather than everybody
    assert call(app, "POST", "/v1/chat/completions", CHAT)[0] == 401
