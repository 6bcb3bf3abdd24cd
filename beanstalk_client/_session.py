"""Matching replies to callers, shared by the sync and async clients (no I/O here).

The core (:class:`~beanstalk_client._protocol.Connection`) turns commands into bytes and bytes
into replies. A client also needs to know *whose* reply each one is, to turn error replies into
typed exceptions, and to fail every waiting caller at once when the connection dies. That is
this module, on :class:`jobwire._session.FifoSession` (beanstalkd answers strictly in order); the
transports of :mod:`jobwire._transport` only move its bytes.

A caller that gives up abandons its Pending (:mod:`jobwire._pending`): the reply still arrives
in its place and is dropped. A reserve abandoned that way may still be answered with a job; the
session then gives that job back to the server at once (``stats-job`` to learn its priority,
then ``release``) instead of leaving it reserved until its TTR runs out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from jobwire._pending import Pending as BasePending
from jobwire._session import FifoSession
from jobwire.errors import RemoteProtocolError

from ._commands import Command, Release, StatsJob
from ._events import BuriedReply, ConnectionClosed, ErrorReply, Ok, Reply, Reserved
from ._protocol import DEFAULT_MAX_BODY_SIZE, Connection
from ._stats import parse_job_stats
from .errors import ERRORS, Buried

__all__ = ["Pending", "Session"]

R = TypeVar("R", bound=Reply, covariant=True)


class Pending(BasePending[R]):
    """A beanstalk command sent and awaiting its reply."""

    __slots__ = ("command",)

    def __init__(self, command: Command[R]) -> None:
        super().__init__(command.name)
        self.command = command


class Session(FifoSession["Pending[Reply]"]):
    """A client connection's core plus the FIFO of callers awaiting replies."""

    __slots__ = ("conn",)
    closed_event = ConnectionClosed

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        super().__init__()
        self.conn = Connection(max_body_size=max_body_size)

    def submit(self, command: Command[R]) -> Pending[R]:
        """Queue ``command`` for sending and return its Pending.

        Raises:
            ConnectionLost: the connection is already broken or closed.
            LocalProtocolError: the core refuses the command (e.g. after ``quit``).
        """
        self.check_usable()
        self.queue(self.conn.send(command))
        pending: Pending[R] = Pending(command)
        self.expect(pending)
        return pending

    def dispatch(self, event: Reply) -> None:
        """Complete the oldest Pending with ``event``: its reply, or a typed error."""
        self._complete(self._fifo.popleft(), event)

    def _complete(self, pending: Pending[Reply], reply: Reply) -> None:
        command = pending.command
        if type(reply) is command.reply:
            if pending.abandoned and isinstance(reply, Reserved):
                self.give_back(reply.job_id)
            pending.resolve(reply)
        elif isinstance(reply, ErrorReply):
            pending.reject(ERRORS[reply.code]())
        elif isinstance(reply, BuriedReply):  # put or release hit out-of-memory
            job_id = reply.job_id if reply.job_id is not None else getattr(command, "job_id", None)
            pending.reject(Buried(job_id))
        else:  # the core already checked the word; this is a second line of defence
            self.fail(RemoteProtocolError(f"{reply!r} cannot answer {command.name}"))

    def give_back(self, job_id: int, done: Callable[[bool], None] | None = None) -> None:
        """Release a reserved job, keeping its priority: ``stats-job`` learns it, ``release``
        follows. ``done(True/False)`` is called once the release is answered (or failed)."""

        def release(stats: BasePending[Ok]) -> None:
            if stats.reply is not None and self.broken is None:
                priority = parse_job_stats(stats.reply.data)["pri"]
                follow = self.submit(Release(job_id, priority, 0))
                if done is not None:
                    follow.then = lambda p: done(p.error is None)
            elif done is not None:
                done(False)

        if self.broken is None:
            self.submit(StatsJob(job_id)).then = release
        elif done is not None:
            done(False)
