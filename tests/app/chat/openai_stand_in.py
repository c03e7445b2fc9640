"""A small stand-in for an OpenAI-compatible server (llama-server, Ollama, another machine's
`hearth serve`), on 127.0.0.1 in a thread: /v1/models, and /v1/chat/completions streaming a
scripted reply with `usage`. A reply may be held after its first piece until the test lets it go
(a reply still running, to stop), always within a bound."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOLD_BOUND_S = 10  # a held reply goes on by itself after this, so no test can hang on it


class OpenAIStandIn:
    def __init__(self, *, key: str = "", models=("remote-model",), pieces=("Hello", " there")):
        self.key = key
        self.models = list(models)
        self.pieces = list(pieces)
        self.usage: dict | None = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
        self.hold = False  # hold each reply after its first piece until `release`
        # The next replies' tool calls, one list of (name, arguments JSON) per reply, streamed
        # the OpenAI way: the name first, the arguments in two parts.
        self.tool_calls: list[list[tuple[str, str]]] = []
        self.release = threading.Event()
        self.requests: list[dict] = []  # the chat requests' bodies
        self.auth: list[str] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                if not stand_in._authorized(self):
                    return
                if self.path != "/v1/models":
                    return self._json(404, {"error": {"message": "not found"}})
                data = [{"id": m, "object": "model"} for m in stand_in.models]
                self._json(200, {"object": "list", "data": data})

            def do_POST(self):
                if not stand_in._authorized(self):
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stand_in.requests.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    if stand_in.tool_calls:
                        self._calls(stand_in.tool_calls.pop(0))
                        self.wfile.write(b"data: [DONE]\n\n")
                        return
                    for i, piece in enumerate(stand_in.pieces):
                        self._event({"choices": [{"index": 0, "delta": {"content": piece}}]})
                        if i == 0 and stand_in.hold:
                            stand_in.release.wait(HOLD_BOUND_S)
                    self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                    if stand_in.usage is not None:
                        self._event({"choices": [], "usage": stand_in.usage})
                    self.wfile.write(b"data: [DONE]\n\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped the reply

            def _calls(self, calls):
                for index, (name, arguments) in enumerate(calls):
                    half = len(arguments) // 2
                    first = {"index": index, "id": f"c{index}", "type": "function",
                             "function": {"name": name, "arguments": ""}}  # fmt: skip
                    self._event({"choices": [{"delta": {"tool_calls": [first]}}]})
                    for part in (arguments[:half], arguments[half:]):
                        more = {"index": index, "function": {"arguments": part}}
                        self._event({"choices": [{"delta": {"tool_calls": [more]}}]})
                done = {"delta": {}, "finish_reason": "tool_calls"}
                self._event({"choices": [done], "usage": stand_in.usage})

            def _event(self, data):
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def _json(self, status, data):
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _authorized(self, handler) -> bool:
        said = handler.headers.get("Authorization", "")
        self.auth.append(said)
        if self.key and said != f"Bearer {self.key}":
            handler._json(401, {"error": {"message": "Invalid API key"}})
            return False
        return True

    def __enter__(self) -> OpenAIStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
