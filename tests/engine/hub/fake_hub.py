"""A fake Hugging Face Hub on 127.0.0.1: the endpoints Hearth uses, with faults on demand.

    GET  /api/models?search=&filter=&sort=&limit=         model search (list_models)
    GET  /api/models/<repo>[/revision/<rev>]?blobs=true   model info, siblings with lfs.sha256
    GET  /<repo>/resolve/<rev>/<file>                      the file, with Range (206, 416)
    HEAD /<repo>/resolve/<rev>/<file>                      X-Linked-Size, X-Linked-Etag, ETag

Faults are queued per file and each GET on that file takes the next one: `Cut(at)` sends the
body up to absolute byte `at` and drops the connection, `Status(code)` answers with an error,
`Slow(delay_s)` stalls before the body (a read timeout), `IgnoreRange()` answers 200 with the
whole file. `flip[filename] = offset` serves that byte inverted on every request;
`Repo.not_in_lfs` lists files with a size and no sha256 (a git file, or a mirror). The server
shuts itself down after `lifetime_s` even if a test forgets to.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_INFO = re.compile(r"^/api/models/([^/]+/[^/]+?)(?:/revision/([^/]+))?$")


@dataclass(frozen=True)
class Cut:
    at: int


@dataclass(frozen=True)
class Status:
    code: int


@dataclass(frozen=True)
class Slow:
    delay_s: float


@dataclass(frozen=True)
class IgnoreRange:
    pass


class Sparse:
    """A large file that is its header and then zeros (a model whose weights nobody fetches):
    only the header is kept in memory, and its listed sha256 is made up."""

    def __init__(self, header: bytes, size: int) -> None:
        self.header, self.size = header, size
        self.sha256 = hashlib.sha256(header + size.to_bytes(8, "little")).hexdigest()

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(self.size)
        head = self.header[start:stop]
        return head + bytes(max(0, stop - max(start, len(self.header))))


def _sha256(content: bytes | Sparse) -> str:
    return content.sha256 if isinstance(content, Sparse) else hashlib.sha256(content).hexdigest()


@dataclass
class Repo:
    repo_id: str
    files: dict[str, bytes | Sparse]
    license: str | None = "apache-2.0"
    downloads: int = 0
    likes: int = 0
    last_modified: str = "2025-01-01T00:00:00.000Z"
    tags: list[str] = field(default_factory=lambda: ["gguf"])
    gated: bool = False
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    sha256_override: dict[str, str] = field(default_factory=dict)  # a Hub that lies
    not_in_lfs: set[str] = field(default_factory=set)  # listed with a size and no sha256


class FakeHub:
    def __init__(self, lifetime_s: float = 120.0) -> None:
        self.repos: dict[str, Repo] = {}
        self.faults: dict[str, list[object]] = {}
        self.flip: dict[str, int] = {}
        self.api_status: int | None = None  # set: every /api/ request answers with it
        self.requests: list[tuple[str, str, str | None, int]] = []  # method, path, Range, status
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hub._handle(self, head=False)

            def do_HEAD(self) -> None:
                hub._handle(self, head=True)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        self._watchdog = threading.Timer(lifetime_s, self.close)
        self._watchdog.daemon = True
        self._watchdog.start()
        self._closed = False

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add_repo(self, repo_id: str, files: dict[str, bytes | Sparse], **meta) -> Repo:
        repo = Repo(repo_id, dict(files), **meta)
        self.repos[repo_id] = repo
        return repo

    def add_faults(self, filename: str, *faults: object) -> None:
        with self._lock:
            self.faults.setdefault(filename, []).extend(faults)

    def resolve_requests(self, filename: str) -> list[tuple[str, str | None, int]]:
        return [(m, r, s) for m, p, r, s in self.requests if p.endswith("/" + filename)]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._watchdog.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- handlers -------------------------------------------------------------------------------

    def _handle(self, req: BaseHTTPRequestHandler, head: bool) -> None:
        parsed = urlparse(req.path)
        path = unquote(parsed.path)
        query = parse_qs(parsed.query)
        if self.api_status is not None and path.startswith("/api/"):
            return self._status(req, "GET", self.api_status)
        if path == "/api/models":
            return self._json(req, head, self._search(query))
        match = _INFO.match(path)
        if match:
            if match.group(1) not in self.repos:  # as the Hub says it
                return self._status(req, "GET", 404, {"X-Error-Code": "RepoNotFound"})
            return self._json(req, head, self._info(self.repos[match.group(1)], query))
        match = _RESOLVE.match(path)
        if match and match.group(1) in self.repos:
            content = self.repos[match.group(1)].files.get(match.group(3))
            if content is not None:
                return self._file(req, head, match.group(3), content)
        self._status(req, "GET", 404)

    def _log(self, req: BaseHTTPRequestHandler, method: str, status: int) -> None:
        with self._lock:
            self.requests.append((method, unquote(req.path), req.headers.get("Range"), status))

    def _status(self, req: BaseHTTPRequestHandler, method: str, code: int, extra=None) -> None:
        self._log(req, method, code)
        req.send_response(code)
        for key, value in (extra or {}).items():
            req.send_header(key, value)
        req.send_header("Content-Length", "0")
        req.end_headers()

    def _json(self, req: BaseHTTPRequestHandler, head: bool, payload: object) -> None:
        body = json.dumps(payload).encode()
        self._log(req, "HEAD" if head else "GET", 200)
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        if not head:
            req.wfile.write(body)

    def _search(self, query: dict[str, list[str]]) -> list[dict]:
        text = (query.get("search") or [""])[0].lower()
        wanted = set(query.get("filter") or [])
        repos = [
            r for r in self.repos.values() if text in r.repo_id.lower() and wanted <= set(r.tags)
        ]
        sort = (query.get("sort") or ["downloads"])[0]
        key = {"likes": "likes", "lastModified": "last_modified"}.get(sort, "downloads")
        repos.sort(key=lambda r: getattr(r, key), reverse=True)
        limit = int((query.get("limit") or ["1000"])[0])
        return [self._summary(r) for r in repos[:limit]]

    def _summary(self, repo: Repo) -> dict:
        tags = [*repo.tags] + ([f"license:{repo.license}"] if repo.license else [])
        return {
            "_id": repo.repo_id,
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "downloads": repo.downloads,
            "likes": repo.likes,
            "lastModified": repo.last_modified,
            "tags": tags,
            "gated": repo.gated,
            "private": False,
            "library_name": "gguf",
        }

    def _info(self, repo: Repo, query: dict[str, list[str]]) -> dict:
        siblings = []
        for name, content in repo.files.items():
            sibling: dict = {"rfilename": name}
            if query.get("blobs"):
                sha = repo.sha256_override.get(name, _sha256(content))
                sibling["size"] = len(content)
                sibling["blobId"] = sha[:40]
                if name not in repo.not_in_lfs:
                    sibling["lfs"] = {"sha256": sha, "size": len(content), "pointerSize": 134}
            siblings.append(sibling)
        card = {"license": repo.license} if repo.license else {}
        return {**self._summary(repo), "sha": repo.sha, "siblings": siblings, "cardData": card}

    def _file(self, req: BaseHTTPRequestHandler, head: bool, name: str, content) -> None:
        size = len(content)
        etag = _sha256(content)
        if head:
            return self._status(
                req,
                "HEAD",
                200,
                {"X-Linked-Size": str(size), "X-Linked-Etag": f'"{etag}"', "ETag": f'"{etag}"'},
            )
        with self._lock:
            queue = self.faults.get(name) or []
            fault = queue.pop(0) if queue else None
        if isinstance(fault, Status):
            return self._status(req, "GET", fault.code)
        range_header = req.headers.get("Range")
        match = _RANGE.match(range_header or "")
        start, end, status = 0, size - 1, 200
        if match and not isinstance(fault, IgnoreRange):
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
            if start >= size:
                return self._status(req, "GET", 416, {"Content-Range": f"bytes */{size}"})
            status = 206
        self._log(req, "GET", status)
        req.send_response(status)
        req.send_header("Content-Length", str(end - start + 1))
        req.send_header("ETag", f'"{etag}"')
        if status == 206:
            req.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        req.end_headers()
        stop = end + 1
        if isinstance(fault, Cut):
            stop = max(start, min(stop, fault.at))
            req.close_connection = True
        if isinstance(fault, Slow):
            time.sleep(fault.delay_s)
        body = bytearray(content[start:stop])
        flip = self.flip.get(name)
        if flip is not None and start <= flip < stop:
            body[flip - start] ^= 0xFF
        try:
            for pos in range(0, len(body), 64 * 1024):
                req.wfile.write(body[pos : pos + 64 * 1024])
            req.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up (a pause, or its own timeout)
