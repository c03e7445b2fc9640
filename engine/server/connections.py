"""Connection hygiene: how long a client may take to send its request's headers.

uvicorn bounds the pause between requests on a kept-alive connection (`timeout_keep_alive`), the
size of a request's headers (`h11_max_incomplete_event_size`) and the connections open at once
(`limit_concurrency`), but not the time a new connection may take to send its headers: a client
sending one byte every few seconds ("slowloris") holds its connection for ever, and enough of
them fill `limit_concurrency`, after which every other client gets 503. This protocol closes a
connection whose request headers are not complete within `header_seconds` of it opening (or of
the previous reply on it). The body's own time limit is the request guard's (guard.py).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimedH11(H11Protocol):
    header_seconds = 10.0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_timer()  # the next request on this connection gets the same time

    def connection_lost(self, exc) -> None:
        if getattr(self, "_header_timer", None) is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        loop = asyncio.get_running_loop()
        self._header_timer = loop.call_later(self.header_seconds, self._headers_too_slow)

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        # IDLE on their side: no request line and headers complete yet (after a reply, the
        # next request's). A request being answered is never cut here.
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def header_timed_protocol(header_seconds: float) -> type[HeaderTimedH11]:
    """The protocol class for uvicorn's `http` setting, with this header time limit."""
    return type("HeaderTimedH11", (HeaderTimedH11,), {"header_seconds": header_seconds})
