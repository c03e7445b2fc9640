"""Byte sources for files that are not on disk yet: HTTP Range reads, and files on the Hub.

So the planner can answer "will it fit?" before a multi-gigabyte download, the header reader
asks these sources for the header only: a first range of `first_read` bytes, then larger ones
only as far as the header goes (engine.gguf.cursor). Requests go through huggingface_hub's
shared HTTP client (`get_session()`, an httpx client in huggingface_hub 2.x), so proxies,
offline mode, user agent and authentication behave as in every other Hub call; redirects to the
Hub's storage are followed with the Range header kept and the token dropped.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from engine.gguf.errors import GGUFDeadlineError, GGUFError, GGUFSourceError
from engine.gguf.source import KIB, MIB
from engine.hub_names import hub_file_url

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)")

_STATUS_HINTS = {
    401: "authentication required: the repository is private or gated; log in or pass a token",
    403: "access denied: accept the model's terms on the Hub, or check your token",
    404: "not found: check the repository id, the file name and the revision",
    429: "the server is rate-limiting requests; try again in a minute",
}


class HTTPRangeSource:
    """A file at a URL that answers HTTP Range requests (status 206)."""

    first_read = 256 * KIB
    max_read = 8 * MIB

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        name: str | None = None,
        session: Any = None,
        first_read: int | None = None,
        max_read: int | None = None,
    ) -> None:
        self.url = url
        self.name = name or url
        self._headers = dict(headers or {})
        self._session = session
        if first_read is not None:
            self.first_read = first_read
        if max_read is not None:
            self.max_read = max_read
        self._size: int | None = None
        self.bytes_fetched = 0  # body bytes received, for tests and for the curious
        self.requests: list[tuple[int, int]] = []  # (offset, bytes received) per request

    @property
    def size(self) -> int | None:
        return self._size

    def _client(self) -> Any:
        if self._session is not None:
            return self._session
        from huggingface_hub.utils import get_session

        return get_session()

    def read(self, offset: int, length: int, timeout: float | None = None) -> bytes:
        if length <= 0:
            return b""
        headers = {
            **self._headers,
            "Range": f"bytes={offset}-{offset + length - 1}",
            "Accept-Encoding": "identity",
        }
        started = time.monotonic()
        try:
            with self._client().stream("GET", self.url, headers=headers, timeout=timeout) as resp:
                data = self._receive(resp, offset, length, started, timeout)
        except GGUFError:
            raise
        except Exception as exc:  # the HTTP stack's errors vary by version; report them all
            detail = f"GET {self.name} failed: {type(exc).__name__}: {exc}"
            raise GGUFSourceError("http", offset, detail) from exc
        self.bytes_fetched += len(data)
        self.requests.append((offset, len(data)))
        return data

    def _receive(
        self, resp: Any, offset: int, length: int, started: float, timeout: float | None
    ) -> bytes:
        status = resp.status_code
        if status == 416:  # the range starts at or past the end: nothing more to read
            match = _UNSATISFIED_RANGE.match(resp.headers.get("content-range", ""))
            if match and self._size is None:
                self._size = int(match.group(1))
            return b""
        if status >= 400:
            hint = _STATUS_HINTS.get(status, "the server refused the request")
            raise GGUFSourceError("http", offset, f"HTTP {status} for {self.name}: {hint}")
        if status == 206:
            self._check_content_range(resp.headers.get("content-range", ""), offset)
        elif status == 200 and offset == 0:
            # The server ignored the Range header and is sending the whole file: take what we
            # asked for from the front of it and hang up.
            total = resp.headers.get("content-length")
            if self._size is None and total is not None and total.isdigit():
                self._size = int(total)
        else:
            detail = f"HTTP {status} for a range request: the server does not support ranges"
            raise GGUFSourceError("http", offset, detail)
        if self._size is None:
            raise GGUFSourceError("http", offset, "the server did not say how large the file is")

        data = bytearray()
        for chunk in resp.iter_bytes():
            data += chunk
            if len(data) >= length:
                break
            if timeout is not None and time.monotonic() - started > timeout:
                raise GGUFDeadlineError("http", offset, f"the download took over {timeout:.1f} s")
        return bytes(data[:length])

    def _check_content_range(self, header: str, offset: int) -> None:
        match = _CONTENT_RANGE.match(header)
        if not match:
            raise GGUFSourceError("http", offset, f"unusable Content-Range {header[:80]!r}")
        start, total = int(match.group(1)), match.group(3)
        if start != offset:
            raise GGUFSourceError("http", offset, f"asked for byte {offset}, got byte {start}")
        if total == "*":
            raise GGUFSourceError("http", offset, "the server did not say how large the file is")
        if self._size is None:
            self._size = int(total)

    def close(self) -> None:
        pass  # the shared session belongs to huggingface_hub


class HubFileSource(HTTPRangeSource):
    """A file in a Hub repository, read by ranges from its `resolve` URL.

    The repository, file name and revision are checked as download names are
    (engine.hub_names.hub_file_url): `..`, empty parts, backslashes and their encoded forms
    raise UnsafePath (a ValueError) before any request is made.

    The endpoint is `endpoint`, else the HF_ENDPOINT environment variable (read now, so a
    change after import is honoured), else huggingface_hub's default.
    """

    def __init__(
        self,
        repo_id: str,
        filename: str,
        revision: str = "main",
        endpoint: str | None = None,
        token: str | bool | None = None,
        *,
        repo_type: str | None = None,
        session: Any = None,
        first_read: int | None = None,
        max_read: int | None = None,
    ) -> None:
        from huggingface_hub import constants
        from huggingface_hub.utils import build_hf_headers

        endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
        # Checked before any request: the token goes with it, and only to this file's URL.
        url = hub_file_url(endpoint, repo_id, filename, revision, repo_type)
        suffix = "" if revision == "main" else f"@{revision}"
        self.repo_id = repo_id
        self.filename = filename
        self.revision = revision
        super().__init__(
            url,
            headers=build_hf_headers(token=token, library_name="hearth"),
            name=f"hf://{repo_id}/{filename}{suffix}",
            session=session,
            first_read=first_read,
            max_read=max_read,
        )
