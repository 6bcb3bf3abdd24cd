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

DEADLINE_SOON belongs to the connection, not to a caller. beanstalkd answers a waiting reserve
``DEADLINE_SOON`` when a job *this connection* holds is within 1 s of its TTR, to let the
commands queued behind the reserve through (``docs/beanstalkd.md``, "Semantics worth knowing").
On a connection shared by tasks, the reserve it interrupts may be another task's, one that
holds nothing. So when commands that can settle a held job (``delete``, ``release``, ``bury``,
``touch``) are queued behind the interrupted reserve, the session does not raise: it sends the
reserve again, with what is left of its timeout, once everything queued behind it has been
answered. Only a reserve with nothing such queued behind it gets ``DeadlineSoon`` (a caller
holding a job that is about to run out, on a connection that nothing else will unblock). Each
re-issue needs such a command answered first, so a connection cannot spin on DEADLINE_SOON.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from jobwire._pending import Pending as BasePending
from jobwire._session import FifoSession
from jobwire._typing import mypyc_attr
from jobwire.errors import JobwireError, LocalProtocolError, RemoteProtocolError

from ._commands import (
    Bury,
    Command,
    Delete,
    Quit,
    Release,
    Reserve,
    ReserveWithTimeout,
    StatsJob,
    Touch,
)
from ._events import (
    BuriedReply,
    ConnectionClosed,
    ErrorCode,
    ErrorReply,
    Ok,
    Reply,
    Reserved,
)
from ._protocol import DEFAULT_MAX_BODY_SIZE, Connection, ConnectionState
from ._stats import parse_job_stats
from .errors import ERRORS, Buried

__all__ = ["Pending", "Session"]

_monotonic = time.monotonic
_OPEN = ConnectionState.OPEN  # an enum member looked up on its class costs as much as a call

R = TypeVar("R", bound=Reply, covariant=True)

#: Commands that settle or extend a reservation: queued behind a reserve that DEADLINE_SOON
#: interrupted, they are what the server unblocked the connection for.
_SETTLES = (Delete, Release, Bury, Touch)


@mypyc_attr(allow_interpreted_subclasses=True)
class Pending(BasePending[R]):
    """A beanstalk command sent and awaiting its reply."""

    __slots__ = ("command", "sent_at")

    def __init__(self, command: Command[R], sent_at: float) -> None:
        # Every slot set here, without the base's __init__ (one call less per request).
        self.name = command.name
        self.reply = None
        self.error = None
        self.done = False
        self.abandoned = False
        self.waker = None
        self.then = None
        self.command = command
        #: When a reserve-with-timeout was submitted (``time.monotonic``; 0.0 for the other
        #: commands): re-issued, it waits what is left.
        self.sent_at = sent_at


@mypyc_attr(allow_interpreted_subclasses=True)
class Session(FifoSession["Pending[Reply]"]):
    """A client connection's core plus the FIFO of callers awaiting replies."""

    __slots__ = ("_answered", "_deferred")
    closed_event = ConnectionClosed

    def __init__(self, *, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        super().__init__()
        self.conn = Connection(max_body_size=max_body_size)
        # Replies dispatched so far, and the reserves DEADLINE_SOON interrupted for others:
        # (the value of _answered at which to send each again, its Pending), in that order.
        self._answered = 0
        self._deferred: deque[tuple[int, Pending[Reply]]] = deque()

    def submit(self, command: Command[R]) -> Pending[R]:
        """Queue ``command`` for sending and return its Pending.

        Raises:
            ConnectionLost: the connection is already broken or closed.
            LocalProtocolError: the core refuses the command (e.g. after ``quit``).
        """
        if self.broken is not None:
            self.check_usable()
        conn = self.conn
        if conn._state is _OPEN and type(command) is not Quit:  # Connection.send, inline
            data = command.encode()
            conn._pending.append(command)
        else:
            data = conn.send(command)  # raises, or enters CLOSING on quit
        # Only a reserve-with-timeout reads when it was sent (_reissue): no clock for the rest.
        pending: Pending[R] = Pending(
            command, _monotonic() if type(command) is ReserveWithTimeout else 0.0
        )
        if self._next is None and not self._out:  # FifoSession.queue, inline
            self._next = data
        else:
            self._out += data
        self._fifo.append(pending)
        return pending

    @property
    def idle(self) -> bool:
        """No request is in flight, nor awaited by the core (``FifoSession.idle``, without
        its lookups: the transport asks after every read)."""
        return not self._fifo and not self.conn._pending

    def dispatch(self, event: Reply) -> None:
        """Complete the oldest Pending with ``event``: its reply, or a typed error; or, for a
        reserve that DEADLINE_SOON interrupted to let settling commands through, hold it back
        to send again once they are answered (see the module's docstring)."""
        pending = self._fifo.popleft()
        self._answered += 1
        if type(event) is pending.command.reply and not pending.abandoned:
            # The common case: success, for a caller still waiting (Pending.resolve, inline).
            pending.reply = event
            pending.done = True
            if pending.then is not None:
                pending.then(pending)
            if pending.waker is not None:
                pending.waker()
        elif (
            type(event) is ErrorReply
            and event.code is ErrorCode.DEADLINE_SOON
            and not pending.abandoned
            and isinstance(pending.command, (Reserve, ReserveWithTimeout))
            and any(isinstance(p.command, _SETTLES) for p in self._fifo)
        ):
            self._deferred.append((self._answered + len(self._fifo), pending))
        else:
            self._complete(pending, event)
        while self._deferred and self._deferred[0][0] <= self._answered:
            self._reissue(self._deferred.popleft()[1])

    def _reissue(self, pending: Pending[Reply]) -> None:
        """Send an interrupted reserve again, waiting what is left of its timeout."""
        if pending.abandoned:  # its caller is gone: nothing to send
            pending.reject(ERRORS[ErrorCode.DEADLINE_SOON]())
            return
        command = pending.command
        if isinstance(command, ReserveWithTimeout):  # to the nearest second, as the wire counts
            left = command.seconds - (time.monotonic() - pending.sent_at)
            command = ReserveWithTimeout(max(0, math.floor(left + 0.5)))
        try:
            data = self.conn.send(command)
        except LocalProtocolError:  # a reply queued behind closed the connection
            pending.reject(ERRORS[ErrorCode.DEADLINE_SOON]())
            return
        self.queue(data)
        self.expect(pending)

    def fail(self, error: JobwireError) -> None:
        """Mark the connection unusable and fail every waiting request, the reserves held
        back after DEADLINE_SOON included, with ``error``."""
        super().fail(error)
        while self._deferred:
            self._deferred.popleft()[1].reject(type(error)(str(error)))

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
