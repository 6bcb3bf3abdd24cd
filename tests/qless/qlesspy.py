"""qless-py 0.11.4 as a peer on the same Redis: its own client API with the qless-core script it
ships, patched in memory for Redis 7 (``tests/qless/differential.py``: ``their_source``), and a
clock the test can set (qless-py sends ``repr(time.time())``; ``clock=`` replaces only that).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

qless: Any = pytest.importorskip("qless", reason="qless-py is not installed")
redis: Any = pytest.importorskip("redis", reason="redis-py (qless-py's) is not installed")

from qless.exceptions import QlessException  # noqa: E402

from tests.qless.differential import their_source  # noqa: E402

__all__ = ["QlessException", "QlessPy"]


class QlessPy(qless.Client):  # type: ignore[misc]
    """``qless.Client`` on ``url`` as worker ``hostname``, running the patched qless-core
    script (or ``source``: jobwire's, to show qless-py runs on it unchanged), with ``clock``
    for the ``now`` of each call (qless-py's own is ``time.time``)."""

    def __init__(self, url: str, hostname: str, clock: Callable[[], float] = time.time,
                 source: str | None = None) -> None:
        super().__init__(url, hostname=hostname)
        self._lua = self.redis.register_script(their_source() if source is None else source)
        self.clock = clock

    def __call__(self, command: str, *args: Any) -> Any:
        # qless-py's own __call__ with ``clock()`` in place of ``time.time()``.
        try:
            return self._lua(keys=[], args=[command, repr(self.clock()), *args])
        except redis.ResponseError as exc:
            raise QlessException(str(exc)) from None

    def close(self) -> None:
        self.redis.close()
