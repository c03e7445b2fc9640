"""API keys of remote servers, kept in the OS keyring (the `keyring` package: the macOS
Keychain, Windows' Credential Locker, the Secret Service on Linux), never in Hearth's files.

Where no keyring backend exists (a bare Linux session, a container) saving says so with a
KeyStoreError the window shows; the key is then used for this session only.
"""

from __future__ import annotations

SERVICE = "Hearth remote servers"


class KeyStoreError(RuntimeError):
    """The keyring could not keep or give the key; the message says why and what to do."""


def _keyring():
    import keyring  # imported here: a keyring backend's start-up is not free

    return keyring


def _account(base_url: str) -> str:
    return base_url.rstrip("/")


def save_key(base_url: str, key: str) -> None:
    """Keep `key` for the server at `base_url` (an empty key forgets it)."""
    if not key:
        forget_key(base_url)
        return
    keyring = _keyring()
    try:
        keyring.set_password(SERVICE, _account(base_url), key)
    except keyring.errors.KeyringError as exc:
        raise KeyStoreError(_no_keyring(exc)) from None


def read_key(base_url: str) -> str:
    """The key kept for `base_url`, or "" when none is kept or no keyring can be read."""
    keyring = _keyring()
    try:
        return keyring.get_password(SERVICE, _account(base_url)) or ""
    except keyring.errors.KeyringError:
        return ""


def forget_key(base_url: str) -> None:
    keyring = _keyring()
    try:
        keyring.delete_password(SERVICE, _account(base_url))
    except keyring.errors.PasswordDeleteError:
        pass  # none was kept
    except keyring.errors.KeyringError as exc:
        raise KeyStoreError(_no_keyring(exc)) from None


def _no_keyring(exc: Exception) -> str:
    return (
        f"The API key could not be saved in the system keyring ({exc}). It is used for this "
        "session only; install a keyring service (on Linux, GNOME Keyring or KWallet) to keep it."
    )
