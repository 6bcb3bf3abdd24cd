"""Matching replies to callers, shared by the sync and async clients (no I/O here).

The core (:class:`~beanstalk_client._protocol.Connection`) turns commands into bytes and bytes
into replies. A client also needs to know *whose* reply each one is, to turn error replies into
typed exceptions, and to fail every waiting caller at once when the connection dies. That is
this module, written once so the two transports stay thin: they only move
:meth:`Session.data_to_send` to the socket and socket bytes into :meth:`Session.receive_data`.

Every submitted command gets a :class:`Pending` in FIFO order. A caller that gives up (cancelled,
or its own timeout ran out) *abandons* its Pending instead of removing it: the reply still
arrives in its place and is dropped, so it can never reach the next caller (redis-py #2624).
A reserve abandoned that way may still be answered with a job; the session then gives that job
back to the server at once (``stats-job`` to learn its priority, then ``release``) instead of
leaving it reserved until its TTR runs out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from jobwire.errors import ConnectionLost, JobwireError, RemoteProtocolError

from ._commands import Command, Release, StatsJob
from ._events import NEED_DATA, BuriedReply, ConnectionClosed, ErrorReply, Ok, Reply, Reserved
from ._protocol import DEFAULT_MAX_BODY_SIZE, Connection
from ._stats import parse_job_stats
from .errors import ERRORS, Buried

__all__ = ["Pending", "Session"]

R = TypeVar("R", bound=Reply, covariant=True)


class Pending(Generic[R]):
    """A command sent and awaiting its reply."""

    __slots__ = ("abandoned", "command", "done", "error", "reply", "then", "waker")

    def __init__(self, command: Command[R]) -> None:
        self.command = command
        self.reply: R | None = None
        self.error: JobwireError | None = None
        self.done = False
        #: The caller went away; the reply will be dropped (or a reserved job given back).
        self.abandoned = False
        #: Called when the reply arrives (the async client wakes its waiting task with it).
        self.waker: Callable[[], None] | None = None
        #: Internal follow-up run on the reply (used to give back an orphaned job).
        self.then: Callable[[Pending[R]], None] | None = None

    def result(self) -> R:
        """The success reply, or raise the typed error the server answered with."""
        if self.error is not None:
            raise self.error
        assert self.reply is not None, "result() before the reply arrived"
        return self.reply


class Session:
    """A client connection's core plus the FIFO of callers awaiting replies."""

    __slots__ = ("_fifo", "_out", "broken", "conn")

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        self.conn = Connection(max_body_size=max_body_size)
        self._out = bytearray()
        self._fifo: deque[Pending[Reply]] = deque()
        #: Why the connection can no longer be used, once it cannot.
        self.broken: JobwireError | None = None

    @property
    def in_flight(self) -> int:
        """Commands sent (or queued to send) whose replies have not arrived."""
        return len(self._fifo)

    def submit(self, command: Command[R]) -> Pending[R]:
        """Queue ``command`` for sending and return its Pending.

        Raises:
            ConnectionLost: the connection is already broken or closed.
            LocalProtocolError: the core refuses the command (e.g. after ``quit``).
        """
        if self.broken is not None:
            raise ConnectionLost(f"connection unusable: {self.broken}")
        self._out += self.conn.send(command)
        pending: Pending[R] = Pending(command)
        self._fifo.append(pending)
        return pending

    def submit_quit(self, command: Command[Reply]) -> None:
        """Queue a command that gets no reply (``quit``)."""
        self._out += self.conn.send(command)

    def data_to_send(self) -> bytes:
        """Take every byte queued for the socket."""
        if not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        return data

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the socket (``b""`` at EOF) and complete every Pending they answer."""
        self.conn.receive_data(data)
        fifo = self._fifo
        conn = self.conn
        while True:
            try:
                event = conn.next_event()
            except RemoteProtocolError as exc:
                self.fail(exc)
                return
            if event is NEED_DATA:
                return
            if isinstance(event, ConnectionClosed):
                what = "mid-reply" if event.partial else "with replies outstanding"
                self.fail(
                    ConnectionLost(f"server closed the connection {what}: {event.reason}")
                    if event.pending
                    else ConnectionLost(f"server closed the connection: {event.reason}")
                )
                return
            self._complete(fifo.popleft(), event)

    def _complete(self, pending: Pending[Reply], reply: Reply) -> None:
        command = pending.command
        if type(reply) is command.reply:
            pending.reply = reply
        elif isinstance(reply, ErrorReply):
            pending.error = ERRORS[reply.code]()
        elif isinstance(reply, BuriedReply):  # put or release hit out-of-memory
            pending.error = Buried(
                reply.job_id if reply.job_id is not None else getattr(command, "job_id", None)
            )
        else:  # the core already checked the word; this is a second line of defence
            self.fail(RemoteProtocolError(f"{reply!r} cannot answer {command.name}"))
            return
        pending.done = True
        if pending.abandoned and isinstance(reply, Reserved):
            self.give_back(reply.job_id)
        if pending.then is not None:
            pending.then(pending)
        if pending.waker is not None:
            pending.waker()

    def give_back(self, job_id: int, done: Callable[[bool], None] | None = None) -> None:
        """Release a reserved job, keeping its priority: ``stats-job`` learns it, ``release``
        follows. ``done(True/False)`` is called once the release is answered (or failed)."""

        def release(stats: Pending[Ok]) -> None:
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

    def fail(self, error: JobwireError) -> None:
        """Mark the connection unusable and fail every waiting caller with ``error``."""
        if self.broken is None:
            self.broken = error
        while self._fifo:
            pending = self._fifo.popleft()
            pending.error = type(error)(str(error))
            pending.done = True
            if pending.then is not None:
                pending.then(pending)
            if pending.waker is not None:
                pending.waker()

    def oldest_waiting(self) -> Pending[Reply] | None:
        """The oldest Pending whose caller is still waiting (to hand the reader role to)."""
        for pending in self._fifo:
            if pending.waker is not None and not pending.abandoned:
                return pending
        return None
