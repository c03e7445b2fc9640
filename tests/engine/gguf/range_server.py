"""A local HTTP server (127.0.0.1 only) that serves files with Range support, like the Hub.

It counts the body bytes it sends, so tests can check that a remote header read fetched the
header and not the weights.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class RangeServer:
    def __init__(self) -> None:
        self.files: dict[str, bytes | Path] = {}
        self.honour_range = True
        self.bytes_sent = 0
        self.requests: list[tuple[str, str | None, int]] = []  # (path, Range header, status)
        self.authorized: list[str] = []  # paths requested with an Authorization header
        self.redirects: dict[str, str] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def serve(self, path: str, content: bytes | Path) -> str:
        self.files[path] = content
        return self.url + path

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _record(self, path: str, range_header: str | None, status: int) -> None:
        with self._lock:
            self.requests.append((path, range_header, status))

    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path.split("?")[0]
        range_header = req.headers.get("Range")
        if req.headers.get("Authorization"):
            with self._lock:
                self.authorized.append(path)
        if path in self.redirects:
            self._record(path, range_header, 302)
            req.send_response(302)
            req.send_header("Location", self.redirects[path])
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        content = self.files.get(path)
        if content is None:
            self._record(path, range_header, 404)
            req.send_response(404)
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        size = content.stat().st_size if isinstance(content, Path) else len(content)
        start, end, status = 0, size - 1, 200
        match = _RANGE.match(range_header or "") if self.honour_range else None
        if match:
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
            if start >= size:
                self._record(path, range_header, 416)
                req.send_response(416)
                req.send_header("Content-Range", f"bytes */{size}")
                req.send_header("Content-Length", "0")
                req.end_headers()
                return
            status = 206
        self._record(path, range_header, status)
        length = end - start + 1
        req.send_response(status)
        req.send_header("Content-Type", "application/octet-stream")
        req.send_header("Content-Length", str(length))
        if status == 206:
            req.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        req.end_headers()
        self._send_body(req, content, start, length)

    def _send_body(self, req: BaseHTTPRequestHandler, content, start: int, length: int) -> None:
        chunk = 64 * 1024
        if isinstance(content, Path):
            with open(content, "rb") as f:
                f.seek(start)
                while length > 0:
                    data = f.read(min(chunk, length))
                    if not self._write(req, data):
                        return
                    length -= len(data)
        else:
            for pos in range(start, start + length, chunk):
                if not self._write(req, content[pos : min(pos + chunk, start + length)]):
                    return

    def _write(self, req: BaseHTTPRequestHandler, data: bytes) -> bool:
        """Send `data`, counted before it goes out: a client that has read the bytes finds
        them counted (counting after the write raced the client's own check). False: the
        client hung up (once it had what it needed), and what did not go out is not counted."""
        self._count(len(data))
        try:
            req.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self._count(-len(data))
            return False
        return True

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n
