"""API keys in the keyring, against an in-memory keyring and keyring's own "no backend" one:
a test never writes the real keyring."""

from __future__ import annotations

import pytest
from keyring.backends import fail

from engine.remote.keys import SERVICE, KeyStoreError, forget_key, read_key, save_key
from tests.keyring_stand_in import keyring_in_use

URL = "http://box.lan:8080/v1"


@pytest.fixture
def no_keyring():
    with keyring_in_use(fail.Keyring()):
        yield


def test_a_key_is_kept_read_and_forgotten(memory_keyring):
    save_key(URL + "/", "sk-123")
    assert memory_keyring.kept == {(SERVICE, URL): "sk-123"}
    assert read_key(URL) == "sk-123"
    save_key(URL, "")  # an empty key forgets it
    assert read_key(URL) == "" and memory_keyring.kept == {}
    forget_key(URL)  # forgetting one not kept is fine


def test_without_a_keyring_saving_says_so_and_reading_finds_none(no_keyring):
    with pytest.raises(KeyStoreError, match=r"this session only; install a keyring"):
        save_key(URL, "sk-123")
    assert read_key(URL) == ""
