"""Resumable, verified downloads of Hub files (one file, or a split set) into the models folder.

    downloader = Downloader(endpoint=..., stop=StopFlag(), on_progress=print)
    paths = downloader.download(files, dests, quarantine_dir)   # -> the promoted paths

Bytes go to `<dest>.part`; after a dropped connection, a timeout, a 5xx or an app restart the
next request asks for `Range: bytes=<part size>-`, so nothing received is fetched twice. When
every file of the set is complete its sha256 is compared with the Hub's LFS hash, and only then
are the files renamed into place: the library never holds a partial file, nor one that differs
from the hash the Hub lists. A mismatch moves the `.part` into quarantine.

A file the Hub lists no sha256 for (not stored in LFS, or a mirror that omits it) cannot be
verified that way. It is checked by what it says of itself: its GGUF header must parse and its
tensor data must end where the header says (engine.gguf.load_check), else it is quarantined as
damaged. That catches a truncated, padded or foreign file, not a changed byte inside the
weights; so such a file enters the library marked unverified (`Job.verified`, the library's
`verified_by`), and the Library page says so. huggingface_hub's own downloader is not used: it
no longer resumes, and it checks sizes only.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from engine.hub.control import CANCEL, PAUSE, StopFlag
from engine.hub.rate import RateMeter
from engine.hub.records import (
    ChecksumMismatch,
    DamagedFile,
    DiskFull,
    DownloadError,
    DownloadStopped,
    Progress,
    RemoteFile,
)
from engine.hub_names import hub_file_url

RESERVE_BYTES = 64 * 1024 * 1024  # left free beyond the download, so the disk never fills up
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+)")
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_FATAL_STATUS = {
    401: "the repository is private or gated: log in to the Hub with a token",
    403: "access denied: accept the model's terms on its Hub page, or check your token",
    404: "the file is gone from the Hub: refresh the repository's file list",
}


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6  # failures in a row without a single byte received, before giving up
    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    connect_timeout_s: float = 15.0
    read_timeout_s: float = 30.0  # a body that sends nothing for this long is retried

    def delay(self, failures: int) -> float:
        return min(self.max_delay_s, self.first_delay_s * 2 ** max(0, failures - 1))


def resolve_url(endpoint: str, file: RemoteFile) -> str:
    """The file's URL; UnsafePath for a name that would lead elsewhere (engine.hub_names)."""
    return hub_file_url(endpoint, file.repo_id, file.filename, file.revision)


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def write_all(f: BinaryIO, data: bytes) -> None:
    """The write seam (tests replace it to inject ENOSPC): an unbuffered write of all of `data`,
    so what reaches the disk is exactly the file size a resume starts from."""
    view = memoryview(data)
    while view:
        written = f.write(view)
        view = view[written or 0 :]


def free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


class _Retryable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _size_text(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


class Downloader:
    def __init__(
        self,
        *,
        endpoint: str | None = None,
        token: str | bool | None = None,
        session: Any = None,
        policy: RetryPolicy | None = None,
        stop: StopFlag | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        write: Callable[[BinaryIO, bytes], None] = write_all,
        free_space: Callable[[Path], int] = free_bytes,
        reserve_bytes: int = RESERVE_BYTES,
    ) -> None:
        from huggingface_hub import constants
        from huggingface_hub.utils import build_hf_headers

        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip(
            "/"
        )
        self._headers = build_hf_headers(token=token, library_name="hearth")
        self._session = session
        self.policy = policy or RetryPolicy()
        self.stop = stop or StopFlag()
        self._on_progress = on_progress
        self._write = write
        self._free_space = free_space
        self.reserve_bytes = reserve_bytes
        self._meter = RateMeter()
        self._last_report = 0.0
        self._total = 0
        self._done_before = 0  # bytes of the set's files before the one in flight

    # -- the set --------------------------------------------------------------------------------

    def download(
        self, files: Sequence[RemoteFile], dests: Sequence[Path], quarantine_dir: Path
    ) -> list[Path]:
        if len(files) != len(dests) or not files:
            raise ValueError("download() needs one destination per file, and at least one file")
        dests = [Path(d) for d in dests]
        pending = [(f, d) for f, d in zip(files, dests, strict=True) if not _complete(f, d)]
        self._total = sum(f.size for f in files)
        self._check_space(pending)
        try:
            for file, dest in pending:
                dest.parent.mkdir(parents=True, exist_ok=True)
                self._done_before = sum(_have(f, d) for f, d in pending if d != dest) + sum(
                    f.size for f, d in zip(files, dests, strict=True) if _complete(f, d)
                )
                self._fetch(file, part_path(dest))
            self._done_before = self._total - sum(f.size for f, _d in pending)
            for file, dest in pending:  # verify all before promoting any: a set is one model
                self._verify(file, part_path(dest), quarantine_dir)
                self._done_before += file.size
        except DownloadStopped as stopped:
            if stopped.reason == CANCEL:
                for _file, dest in pending:
                    part_path(dest).unlink(missing_ok=True)
            raise
        for _file, dest in pending:
            os.replace(part_path(dest), dest)
        self._report("verifying", self._total, force=True)
        return dests

    def _check_space(self, pending: list[tuple[RemoteFile, Path]]) -> None:
        if not pending:
            return
        folder = pending[0][1].parent
        probe = folder
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        need = sum(f.size - _have(f, d) for f, d in pending)
        free = self._free_space(probe)
        if free < need + self.reserve_bytes:
            raise DiskFull(
                f"Not enough free disk space for {pending[0][0].filename}: it needs "
                f"{_size_text(need)} more (plus {_size_text(self.reserve_bytes)} to spare) and "
                f"{probe} has {_size_text(free)} free. Free some space or choose another models "
                "folder, then start the download again."
            )

    # -- one file -------------------------------------------------------------------------------

    def _fetch(self, file: RemoteFile, part: Path) -> None:
        failures = 0
        while True:
            have = part.stat().st_size if part.exists() else 0
            if have > file.size:  # cannot be a prefix of this file (it changed on the Hub)
                part.unlink()
                have = 0
            if have == file.size:
                return
            self._check_stop()
            try:
                self._fetch_once(file, part, have)
                continue
            except _Retryable as exc:
                received = (part.stat().st_size if part.exists() else 0) != have
                failures = 1 if received else failures + 1
                reason = exc.message
            if failures > self.policy.attempts:
                kept = part.stat().st_size if part.exists() else 0
                raise DownloadError(
                    f"Downloading {file.filename} failed {failures} times in a row; the last "
                    f"error: {reason}. The {_size_text(kept)} received are kept: check your "
                    "connection and resume to continue from there."
                )
            if self.stop.sleep(self.policy.delay(failures)):
                self._check_stop()

    def _fetch_once(self, file: RemoteFile, part: Path, have: int) -> None:
        headers = {**self._headers, "Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        policy = self.policy
        # (connect, read, write, pool), the tuple form both httpx and huggingface_hub's httpx2 take
        read = policy.read_timeout_s
        timeout = (policy.connect_timeout_s, read, read, policy.connect_timeout_s)
        url = resolve_url(self.endpoint, file)
        try:
            with self._client().stream(
                "GET", url, headers=headers, timeout=timeout, follow_redirects=True
            ) as resp:
                start = self._check_response(resp, file, have)
                self._receive(resp, file, part, start)
        except (_Retryable, DownloadError, DownloadStopped):
            raise
        except Exception as exc:  # the HTTP stack's errors vary by version: all are retried
            raise _Retryable(f"{type(exc).__name__}: {exc or 'connection lost'}") from exc
        if part.stat().st_size < file.size:
            raise _Retryable("the server ended the body early")

    def _check_response(self, resp: Any, file: RemoteFile, have: int) -> int:
        """Where the body starts in the file; raises for statuses that are not a body."""
        status = resp.status_code
        if status == 206:
            match = _CONTENT_RANGE.match(resp.headers.get("content-range", ""))
            if not match or int(match.group(1)) != have:
                raise _Retryable(f"the server answered a different range ({match and match[0]})")
            if int(match.group(3)) != file.size:
                self._changed(file, int(match.group(3)))
            return have
        if status == 200:  # the whole file: the server ignored the range
            length = resp.headers.get("content-length")
            if length is not None and length.isdigit() and int(length) != file.size:
                self._changed(file, int(length))
            return 0
        if status in _FATAL_STATUS:
            raise DownloadError(f"HTTP {status} for {file.filename}: {_FATAL_STATUS[status]}.")
        if status == 416 or status == 429 or status >= 500:
            raise _Retryable(f"HTTP {status} from the server")
        raise DownloadError(
            f"HTTP {status} for {file.filename}: the server refused the download. Try again "
            "later; the bytes received so far are kept."
        )

    def _changed(self, file: RemoteFile, size: int) -> None:
        raise DownloadError(
            f"{file.filename} is now {size:,} bytes on the Hub, the file list said "
            f"{file.size:,}: the repository changed. Refresh it and start the download again."
        )

    def _receive(self, resp: Any, file: RemoteFile, part: Path, start: int) -> None:
        with open(part, "r+b" if part.exists() else "wb", buffering=0) as f:
            f.truncate(start)
            f.seek(start)
            pos = start
            for chunk in resp.iter_bytes():  # as received: a cut loses nothing
                self._check_stop()
                chunk = chunk[: file.size - pos]
                if not chunk:
                    break
                try:
                    self._write(f, chunk)
                except OSError as exc:
                    self._write_failed(exc, file, part)
                pos += len(chunk)
                self._report("downloading", self._done_before + pos)

    def _write_failed(self, exc: OSError, file: RemoteFile, part: Path) -> None:
        if exc.errno in _DISK_FULL:
            kept = part.stat().st_size if part.exists() else 0
            raise DiskFull(
                f"The disk holding {part.parent} is full; {file.filename} stopped. The "
                f"{_size_text(kept)} received are kept in {part.name}, and take that much of "
                "the disk: free some space elsewhere and resume, or cancel the download to "
                "delete them.",
                part=str(part),
                part_bytes=kept,
            ) from exc
        raise DownloadError(
            f"Could not write {part}: {exc.strerror or exc}. Check that the models folder is "
            "writable, then resume."
        ) from exc

    def _verify(self, file: RemoteFile, part: Path, quarantine_dir: Path) -> None:
        if file.sha256 is None:
            self._check_structure(file, part, quarantine_dir)
            return
        digest = hashlib.sha256()
        done = 0
        with open(part, "rb") as f:
            while block := f.read(4 * 1024 * 1024):
                self._check_stop()
                digest.update(block)
                done += len(block)
                self._report("verifying", self._done_before + done)
        if digest.hexdigest() == file.sha256.lower():
            return
        target = _quarantine(file, part, quarantine_dir)
        raise ChecksumMismatch(
            f"{file.filename} arrived damaged: its sha256 is {digest.hexdigest()[:16]}…, the Hub "
            f"says {file.sha256[:16]}…. It was moved to {target} and not added to the library. "
            "Download it again; if this repeats, your connection or a proxy alters the data.",
            str(target),
        )

    def _check_structure(self, file: RemoteFile, part: Path, quarantine_dir: Path) -> None:
        """For a file without a sha256: its header parses and its data ends where it says."""
        from engine.gguf import GGUFError, read_model_info
        from engine.gguf.load_check import data_end_problem

        self._report("verifying", self._done_before + file.size)
        try:
            problem = data_end_problem(read_model_info(part))
        except GGUFError as exc:
            problem = f"its GGUF header does not parse ({exc})"
        if problem is None:
            return
        target = _quarantine(file, part, quarantine_dir)
        raise DamagedFile(
            f"{file.filename} arrived damaged or is not a GGUF model: {problem}. The Hub lists "
            f"no sha256 for it, so this check is all Hearth could do. It was moved to {target} "
            "and not added to the library. Download it again, or get it from another source.",
            str(target),
        )

    # -- helpers --------------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._session is not None:
            return self._session
        from huggingface_hub.utils import get_session

        return get_session()

    def _check_stop(self) -> None:
        if self.stop.requested:
            raise DownloadStopped(self.stop.reason or PAUSE)

    def _report(self, phase: str, done: int, force: bool = False) -> None:
        if self._on_progress is None:
            return
        now = time.monotonic()
        total = self._total
        if phase == "downloading":
            self._meter.add(done)
        if force or now - self._last_report >= 0.1 or done >= total:
            self._last_report = now
            self._on_progress(self._meter.progress(phase, done, total))


def _quarantine(file: RemoteFile, part: Path, quarantine_dir: Path) -> Path:
    quarantine_dir.mkdir(parents=True, exist_ok=True)
    target = quarantine_dir / f"{int(time.time())}-{Path(file.filename).name}"
    shutil.move(part, target)
    return target


def _have(file: RemoteFile, dest: Path) -> int:
    part = part_path(dest)
    return min(file.size, part.stat().st_size) if part.exists() else 0


def _complete(file: RemoteFile, dest: Path) -> bool:
    """Already in the library: files there were verified before they were renamed into place."""
    return dest.exists() and dest.stat().st_size == file.size
