"""The few I/O primitives the command layer needs, in an async and a sync flavour.

``_api_async.py`` is written against ``AsyncTransport`` and ``AsyncBackend``; ``scripts/unasync.py``
turns those names into ``Transport`` and ``Backend`` for ``_api_sync.py``. Both transports are
jobwire's shared ones (:mod:`jobwire._transport`), re-exported here beside the backends.
"""

from __future__ import annotations

import threading
import time

import anyio

from jobwire._transport import AsyncTransport, Transport

__all__ = ["AsyncBackend", "AsyncTransport", "Backend", "Transport"]


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
