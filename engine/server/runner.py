"""Serving the API with uvicorn: in the foreground (`hearth serve`) or on a thread of its own
beside the window (`ServerThread`), over an engine worker that already has the model loaded."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

import uvicorn

from engine.runtime import protocol as p
from engine.runtime.client import EngineClient
from engine.server.app import create_app
from engine.server.config import ServerConfig
from engine.server.connections import header_timed_protocol
from engine.server.engine_link import EngineLink
from engine.server.request_log import RequestLog
from engine.server.server_state import ServerState


class _CancelledAtShutdown(logging.Filter):
    """Requests still running when the server stops (Ctrl+C, the window's Stop) are cancelled
    after `Limits.shutdown_seconds`; uvicorn logs each as "Exception in ASGI application" with a
    CancelledError traceback. That is the stop working, not an error: one line says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, asyncio.CancelledError):
            return False
        if "timeout graceful shutdown exceeded" in record.getMessage():
            record.msg, record.args = "Ending %s request(s) still running.", record.args
        return True


_QUIET_SHUTDOWN = _CancelledAtShutdown()


def build_state(
    client: EngineClient, config: ServerConfig, loaded: p.ModelLoaded, log: RequestLog | None = None
) -> ServerState:
    limits = config.limits
    link = EngineLink(
        client,
        n_parallel=loaded.n_parallel,
        queue_length=limits.queue_length,
        stop_grace_s=limits.stop_grace_seconds,
    )
    link.model = loaded  # it was loaded before the link listened
    link.template_note = loaded.chat_template
    return ServerState(link=link, config=config.check(), log=log or RequestLog())


def uvicorn_server(state: ServerState) -> uvicorn.Server:
    config = state.config
    error_log = logging.getLogger("uvicorn.error")
    if _QUIET_SHUTDOWN not in error_log.filters:
        error_log.addFilter(_QUIET_SHUTDOWN)
    return uvicorn.Server(
        uvicorn.Config(
            create_app(state),
            host=config.host,
            port=config.port,
            log_level="warning",
            access_log=False,
            # h11 (uvicorn's own protocol) with a time limit on the request's headers; the
            # body's size and time are RequestGuard's. See engine/server/connections.py.
            http=header_timed_protocol(config.limits.header_seconds),
            timeout_keep_alive=5,
            h11_max_incomplete_event_size=64 * 1024,
            # Generous: a slow or idle connection is cheap and closed by the time limits;
            # admission to the engine is the link's own bound (n_parallel + --queue).
            limit_concurrency=max(
                config.limits.max_connections,
                4 * (state.link.capacity if state.link is not None else config.limits.queue_length),
            ),
            # Ctrl+C waits this long for requests still running, then ends them: a long
            # generation or embedding must not hold the server's exit for minutes.
            timeout_graceful_shutdown=config.limits.shutdown_seconds,
            lifespan="off",
        )
    )


async def serve_async(state: ServerState, server: uvicorn.Server | None = None) -> None:
    server = server or uvicorn_server(state)
    if state.link is not None:
        state.link.attach(asyncio.get_running_loop())
    try:
        await server.serve()
    finally:
        if state.link is not None:
            state.link.detach()
        if state.models is not None:
            state.models.close()  # every model's worker ends (the loop serves nothing now)


def serve_forever(state: ServerState, server: uvicorn.Server | None = None) -> None:
    """Serve until Ctrl+C (uvicorn handles the signal and ends the loop), or until
    `server.should_exit` is set. A second Ctrl+C while the first is ending requests ends at
    once: the requests' tasks cancelled then are no error to print (KeyboardInterrupt goes on
    to the command line, which exits with 130)."""
    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(serve_async(state, server))


class ServerThread:
    """The server on a thread of its own, for the window: `start()`, then `stop()`."""

    def __init__(self, state: ServerState):
        self.state = state
        self._server = uvicorn_server(state)
        self._server.install_signal_handlers = lambda: None  # the window owns the signals
        self._thread = threading.Thread(target=self._run, name="api-server", daemon=True)
        self.error: BaseException | None = None

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        for _ in range(int(timeout * 20)):
            if self._server.started or not self._thread.is_alive():
                break
            threading.Event().wait(0.05)
        if not self._server.started:
            raise OSError(
                f"The API server could not listen on {self.state.config.host}:"
                f"{self.state.config.port} ({self.error or 'no answer'}). Is the port in use? "
                "Choose another port."
            )

    def _run(self) -> None:
        try:
            asyncio.run(serve_async(self.state, self._server))
        except BaseException as exc:  # reported by start(); the window stays up
            self.error = exc

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and self._server.started
