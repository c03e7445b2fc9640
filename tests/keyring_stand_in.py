"""An in-memory keyring for the tests that keep API keys, so that no test writes the real one;
the `memory_keyring` fixture (tests/conftest.py offers it to every test) puts one in place."""

from __future__ import annotations

import contextlib

import keyring
import pytest
from keyring.backend import KeyringBackend


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


@contextlib.contextmanager
def keyring_in_use(backend: KeyringBackend):
    """`backend` is the keyring while the block runs; the one before it afterwards."""
    before = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(before)


@pytest.fixture
def memory_keyring():
    with keyring_in_use(MemoryKeyring()) as memory:
        yield memory
