"""``Client``: the blocking Workq client on a plain socket. It only moves bytes.

One thread at a time: share a ``Client`` between threads only behind a lock (or give each thread
its own). A call whose ``timeout`` runs out closes the connection, since its reply would
otherwise be read by the next call. Workq keeps no per-connection state a client relies on, so
when a connection ends -- timeout, server gone, or possibly out of step after a ``-CLIENT-ERROR``
to a command with a data block (docs/workq.md) -- the next call opens a new one.
"""

from __future__ import annotations

from ._client_sync import DEFAULT_PORT as DEFAULT_PORT
from ._client_sync import Client

__all__ = ["Client"]
