"""API keys in the keyring, against an in-memory keyring and keyring's own "no backend" one:
a test never writes the real keyring."""

from __future__ import annotations

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail

from engine.remote.keys import SERVICE, KeyStoreError, forget_key, read_key, save_key

URL = "http://box.lan:8080/v1"


class MemoryKeyring(KeyringBackend):
    priority = 1

    def __init__(self):
        super().__init__()
        self.kept: dict[tuple[str, str], str] = {}

    def set_password(self, service, username, password):
        self.kept[(service, username)] = password

    def get_password(self, service, username):
        return self.kept.get((service, username))

    def delete_password(self, service, username):
        if self.kept.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError("none kept")


@pytest.fixture
def memory_keyring():
    before = keyring.get_keyring()
    memory = MemoryKeyring()
    keyring.set_keyring(memory)
    yield memory
    keyring.set_keyring(before)


@pytest.fixture
def no_keyring():
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(before)


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
