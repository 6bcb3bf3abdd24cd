"""``AsyncClient``: the Workq client on anyio (asyncio and trio). It only moves bytes.

Many tasks may share one client: each call queues its command on the session and waits for its
reply through :class:`jobwire._transport.AsyncTransport` (one writer and one reader at a time,
replies matched in FIFO order). A call that is cancelled, or whose ``timeout`` runs out, abandons
its reply: it is dropped when it arrives, never handed to another caller.

The server answers one connection's commands in order, so a call queued behind a blocking
``lease``/``run``/``result`` waits for it (its ``timeout`` counts from the end of their waits).
An abandoned ``run``/``result`` would hold everything behind it, so the connection is closed
instead (calls in flight with it get ``ConnectionLost``; the next call reconnects) -- unless a
``lease`` is outstanding on it. **An abandoned lease keeps its connection**: the server cannot
be told to drop it, and it leases the next job of one of its names to the connection whether
it is open or not (Workq 0.2.0 does not notice closed connections). Open, the job reaches
this client, which hands it to its next ``lease`` call naming that queue (see
``_session.LeaseDesk``); closed, the job would stay leased to nobody until its TTR. Later calls
wait behind that lease at most the rest of its wait: keep lease waits short.

Workq keeps no per-connection state a client relies on, so when a connection ends -- the server
went away, or it may be out of step after a ``-CLIENT-ERROR`` to a command with a data block --
the next call opens a new one. (The calls in flight on the old one get ``ConnectionLost``.)
Use separate clients for concurrent blocking calls.
"""

from __future__ import annotations

from ._client_async import DEFAULT_PORT as DEFAULT_PORT
from ._client_async import AsyncClient

__all__ = ["DEFAULT_PORT", "AsyncClient"]
