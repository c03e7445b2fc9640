"""What the Hub code passes around: remote files, download progress, and its errors."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFile:
    """One file of a Hub repository, with the size and LFS sha256 the Hub lists for it."""

    repo_id: str
    filename: str
    size: int
    # None where the Hub lists none: a file not stored in LFS, or a mirror that omits it. Such a
    # file is checked by its size and GGUF structure only, and the library marks it unverified.
    sha256: str | None = None
    revision: str = "main"


@dataclass(frozen=True)
class Progress:
    phase: str  # "downloading" or "verifying"
    done_bytes: int
    total_bytes: int
    rate_bps: float | None  # None until there is enough to measure
    eta_s: float | None

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 1.0


class DownloadError(Exception):
    """A download that stopped for good; the message says what happened and what to do.

    `part_kept`: the bytes received so far stay in the `.part` file, and a later resume goes on
    from there."""

    def __init__(self, message: str, *, part_kept: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.part_kept = part_kept


class DiskFull(DownloadError):
    """The disk filled up. The `.part` is kept for a resume, but it holds disk space too:
    `part` and `part_bytes` say where and how much, so the person can be offered to delete it."""

    def __init__(self, message: str, *, part: str | None = None, part_bytes: int = 0) -> None:
        super().__init__(message)
        self.part = part
        self.part_bytes = part_bytes


class ChecksumMismatch(DownloadError):
    def __init__(self, message: str, quarantined: str) -> None:
        super().__init__(message, part_kept=False)
        self.quarantined = quarantined


class DamagedFile(ChecksumMismatch):
    """A file the Hub lists no sha256 for, whose GGUF header does not parse or whose tensor
    data does not end where the header says: quarantined like a sha256 mismatch."""


class DownloadStopped(Exception):
    """Paused (the `.part` stays for a resume) or cancelled (the `.part` is deleted)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
