"""The few I/O primitives the command layer needs, in an async and a sync flavour.

``_api_async.py`` is written against ``AsyncTransport`` and ``AsyncBackend``; ``scripts/unasync.py``
turns those names into ``Transport`` and ``Backend`` for ``_api_sync.py``. Both transports are
jobwire's shared ones (:mod:`jobwire._transport`); :class:`Transport` only defers the sync one's
connect to :meth:`Transport.connect` so both flavours connect at the same point.
"""

from __future__ import annotations

import threading
import time
from typing import Any, TypeVar

import anyio

from jobwire._pending import Pending
from jobwire._session import SessionLike
from jobwire._transport import AsyncTransport, SyncTransport
from jobwire._url import Address
from jobwire.errors import ConnectionLost

__all__ = ["AsyncBackend", "AsyncTransport", "Backend", "Transport"]

R = TypeVar("R")


class AsyncBackend:
    @staticmethod
    async def sleep(seconds: float) -> None:
        await anyio.sleep(seconds)

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @staticmethod
    def new_lock() -> anyio.Lock:
        return anyio.Lock()


class Backend:
    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @staticmethod
    def new_lock() -> threading.Lock:
        return threading.Lock()


class Transport:
    """:class:`jobwire._transport.SyncTransport` with the async transport's connect/close names."""

    def __init__(
        self, address: Address, session: SessionLike, *, connect_timeout: float | None,
        timeout: float | None = None,
    ) -> None:
        self.address = address
        self.session = session
        self.connect_timeout = connect_timeout
        self.timeout = connect_timeout if timeout is None else timeout  # bounds each send
        self._inner: SyncTransport | None = None
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._inner is not None and not self._inner.closed

    @property
    def closed(self) -> bool:
        return self._closed or self.session.broken is not None

    def connect(self) -> None:
        if self._inner is not None:
            return
        if self.closed:
            raise ConnectionLost(f"connection is closed: {self.session.broken or 'by caller'}")
        self._inner = SyncTransport(self.address, self.session, timeout=self.timeout,
                                    connect_timeout=self.connect_timeout)

    def aclose(self) -> None:
        self._closed = True
        if self._inner is not None:
            self._inner.close()
        else:
            self.session.fail(ConnectionLost("closed by caller"))

    def flush(self) -> None:
        if self._inner is None:
            raise ConnectionLost("not connected")
        self._inner.flush()

    def wait(self, pending: Pending[R], limit: float | None) -> R:
        if self._inner is None:
            raise ConnectionLost("not connected")
        return self._inner.wait(pending, limit)

    def wait_done(self, pending: Pending[Any], limit: float | None) -> None:
        if self._inner is None:
            raise ConnectionLost("not connected")
        self._inner.wait_done(pending, limit)
