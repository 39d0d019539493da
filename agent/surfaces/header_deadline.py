"""uvicorn's HTTP/1.1 protocol with a deadline on a request's headers: a client that opens a connection and sends its
headers a byte at a time (or never) is cut off after ``HEADER_TIMEOUT_S``, so trickling clients cannot hold sockets.

uvicorn times out only an idle kept-alive connection, and forgets that timer as soon as any byte arrives; the body has
its own deadline in the guard (``--body-timeout``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0


def with_header_deadline(seconds: float) -> type[H11Protocol]:
    """The protocol class to pass as uvicorn's ``http``: headers must be complete within ``seconds``."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout": seconds})


class HeaderDeadlineProtocol(H11Protocol):
    header_timeout = HEADER_TIMEOUT_S
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request line and headers are in
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # a kept-alive connection's next request has the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_late(self) -> None:
        self._deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
