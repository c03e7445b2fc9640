"""Named API keys for the local server, kept hashed: the file holds each key's name, its SHA-256
and the first characters to recognise it by, never the key.

    store = KeyStore()                  # <data dir>/server/api_keys.json
    key = store.create("laptop")        # shown to the person once; only its hash is written
    store.name_of(b"hk-...")            # "laptop", or None
    store.revoke("laptop")

Created and revoked in the Server page and by `hearth keys`; a running server reads the file
again when it changes, so a revoked key is refused from the next request on (another process
included: `hearth serve --detach`). Keys are 32 random bytes, so a plain SHA-256 is enough (a
slow hash protects guessable passwords; nobody can guess 256 random bits), and it is compared in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from engine.paths import data_dir

KEY_PREFIX = "hk-"
SCOPE_KEY_NAME = "hearth.key_name"  # where the guard puts the name of the key a request sent
MAX_NAME = 64
_NAME = re.compile(r"^[\w.@ -]{1,64}$")


class KeyStoreError(ValueError):
    """A key that cannot be created or revoked; the message says why and what to do."""


@dataclass(frozen=True)
class NamedKey:
    name: str
    sha256: str  # hex
    shown: str  # the key's first characters, e.g. "hk-3fA9…", to tell keys apart
    created_at: float


def default_keys_path() -> Path:
    return data_dir() / "server" / "api_keys.json"


def key_hash(key: bytes | str) -> str:
    raw = key.encode() if isinstance(key, str) else key
    return hashlib.sha256(raw.strip()).hexdigest()


class KeyStore:
    def __init__(self, path: Path | None = None):
        self.path = path or default_keys_path()
        self._lock = threading.Lock()
        self._seen: tuple[float, int] | None = None  # the file's (mtime, size) when read
        self._keys: tuple[NamedKey, ...] = ()

    def listed(self) -> tuple[NamedKey, ...]:
        """The keys as the file has them now (read again only when it changed)."""
        with self._lock:
            try:
                stat = self.path.stat()
                seen = (stat.st_mtime, stat.st_size)
            except OSError:
                self._seen, self._keys = None, ()
                return ()
            if seen != self._seen:
                self._keys, self._seen = _read(self.path), seen
            return self._keys

    def name_of(self, given: bytes) -> str | None:
        """The name of the key `given` is, or None."""
        digest = key_hash(given)
        found = None
        for key in self.listed():  # every key compared: the time says nothing about which
            if hmac.compare_digest(digest, key.sha256):
                found = key.name
        return found

    def create(self, name: str) -> str:
        """A new key named `name`; returns the key itself (it is not kept anywhere)."""
        name = name.strip()
        if not _NAME.match(name):
            raise KeyStoreError(
                f"A key's name is 1 to {MAX_NAME} letters, digits, spaces or . @ _ -; "
                f"{name[:80]!r} is not."
            )
        if any(k.name == name for k in self.listed()):
            raise KeyStoreError(f"There is already a key named {name!r}; choose another name "
                                "or revoke that one first.")  # fmt: skip
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        entry = NamedKey(name=name, sha256=key_hash(key), shown=key[:7] + "…",
                         created_at=time.time())  # fmt: skip
        self._write((*self.listed(), entry))
        return key

    def revoke(self, name: str) -> None:
        kept = tuple(k for k in self.listed() if k.name != name)
        if len(kept) == len(self.listed()):
            raise KeyStoreError(f"There is no key named {name!r}.")
        self._write(kept)

    def _write(self, keys: tuple[NamedKey, ...]) -> None:
        data = {"version": 1, "keys": [k.__dict__ for k in keys]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        # Owner-only from the start: hashes of keys are not for other users to collect.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1)
        os.replace(temporary, self.path)
        with self._lock:
            self._seen = None  # read again: the mtime may not have moved within its resolution


def _read(path: Path) -> tuple[NamedKey, ...]:
    """The file's keys; an unreadable or foreign file holds none (and lets no one in)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return tuple(
            NamedKey(
                name=str(k["name"]),
                sha256=str(k["sha256"]),
                shown=str(k.get("shown", "")),
                created_at=float(k.get("created_at", 0.0)),
            )
            for k in data["keys"]
            if re.fullmatch(r"[0-9a-f]{64}", str(k.get("sha256", "")))
        )
    except (OSError, ValueError, KeyError, TypeError):
        return ()
