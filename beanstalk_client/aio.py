"""``AsyncClient``: the beanstalk client on anyio (asyncio and trio). It only moves bytes.

Many tasks may share one client: each call submits its command to the :class:`Session` (the
bytes and a Pending, in FIFO order, with no await in between) and waits for its Pending on the
shared :class:`jobwire._transport.AsyncTransport`, which says how writers and readers take
turns. A task that is cancelled, or whose ``timeout`` runs out, abandons its Pending: its reply
is dropped when it arrives, never given to another caller; a job reserved for it is released.
"""

from __future__ import annotations

from ._client_async import DEFAULT_PORT as DEFAULT_PORT
from ._client_async import AsyncClient

__all__ = ["AsyncClient"]
