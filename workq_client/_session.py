"""Matching Workq replies to callers, shared by the sync and async clients (no I/O here).

The core (:class:`~workq_client._protocol.Connection`) turns commands into bytes and bytes into
replies, in order. The session gives each command a :class:`~jobwire._pending.Pending` in FIFO
order, turns error replies into typed exceptions, and fails every waiting caller at once when the
connection dies or can no longer be trusted (a ``-CLIENT-ERROR`` to a command that carried a data
block: the server may read that block as a command and answer it, NOTES.md). The client then
opens a new connection for the next call instead of reading that stray reply.
"""

from __future__ import annotations

from jobwire._pending import Pending
from jobwire._session import FifoSession

from ._commands import Command
from ._events import ConnectionClosed, ErrorReply, Reply
from ._protocol import Connection
from .errors import error_for

__all__ = ["WorkqSession"]


class WorkqSession(FifoSession[Pending[Reply]]):
    """One client connection's core plus the FIFO of callers awaiting replies."""

    __slots__ = ("conn",)
    closed_event = ConnectionClosed

    def __init__(self) -> None:
        super().__init__()
        self.conn = Connection()

    def submit(self, command: Command) -> Pending[Reply]:
        """Queue ``command`` for sending and return its Pending.

        Raises:
            ConnectionLost: the connection is already broken or closed.
        """
        self.check_usable()
        self.queue(self.conn.send(command))
        pending: Pending[Reply] = Pending(command.verb)
        self.expect(pending)
        return pending

    def dispatch(self, event: Reply) -> None:
        """Complete the oldest Pending with ``event``: its reply, or a typed error."""
        pending = self._fifo.popleft()
        if isinstance(event, ErrorReply):
            pending.reject(error_for(event))
        else:
            pending.resolve(event)
