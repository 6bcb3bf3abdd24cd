"""Matching Workq replies to callers, shared by the sync and async clients (no I/O here).

The core (:class:`~workq_client._protocol.Connection`) turns commands into bytes and bytes into
replies, in order. The session gives each command a :class:`~jobwire._pending.Pending` in FIFO
order, turns error replies into typed exceptions, and fails every waiting caller at once when the
connection dies or can no longer be trusted (a ``-CLIENT-ERROR`` to a command that carried a data
block: the server may read that block as a command and answer it, docs/workq.md). The client then
opens a new connection for the next call instead of reading that stray reply.

**Leases.** A ``lease`` sent cannot be taken back, and Workq has no way to give a leased job
back either (no release; ``fail`` is final, ``delete`` destroys it). The real server hands the
next job of one of the lease's names to it even when the connection is gone (docs/workq.md). So a
lease whose caller gave up (cancelled, or out of time) is not dropped with its connection: the
connection stays and its reply is still read, and a job in it goes to the :class:`LeaseDesk`
of the client, which gives it to the next ``lease`` call naming its queue -- a call already
waiting, or the next one made (answered at once, nothing sent).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque

from jobwire._pending import Pending
from jobwire._session import FifoSession

from ._commands import Command, Lease, Run
from ._events import OK, ConnectionClosed, ErrorReply, Leased, Reply
from ._protocol import MAX_FIELDS, MAX_RECORD_SIZE, Connection
from .errors import error_for

__all__ = ["LeaseDesk", "WorkqSession"]


class LeaseDesk:
    """Jobs leased for callers that gave up, and the ``lease`` calls waiting for a job.

    One per client, shared by the connections it opens one after another: a leased job may be
    completed or failed on any connection. No I/O.
    """

    __slots__ = ("_unclaimed", "_waiting")

    def __init__(self) -> None:
        # (job, monotonic time it arrived), oldest first.
        self._unclaimed: deque[tuple[Leased, float]] = deque()
        # Lease calls waiting for a job: their names and the Pending their caller waits on.
        self._waiting: list[tuple[frozenset[str], Pending[Reply]]] = []

    @property
    def unclaimed(self) -> list[str]:
        """Ids of the jobs held for the next ``lease`` call that names their queue."""
        return [job.job_id for job, _ in self._unclaimed]

    def take(self, names: frozenset[str], now: float) -> Leased | None:
        """The oldest held job of one of ``names`` (its TTR shortened by the time it was held),
        or None. Jobs whose TTR ran out while held are dropped: the server has requeued them."""
        for entry in list(self._unclaimed):
            job, since = entry
            left_ms = job.ttr_ms - int((now - since) * 1000)
            if left_ms <= 0:
                self._unclaimed.remove(entry)
            elif job.name in names:
                self._unclaimed.remove(entry)
                return dataclasses.replace(job, ttr_ms=left_ms)
        return None

    def wait(self, names: frozenset[str], claim: Pending[Reply]) -> None:
        """Register a lease call waiting on ``claim`` for a job of one of ``names``."""
        self._waiting.append((names, claim))

    def done_waiting(self, claim: Pending[Reply]) -> None:
        self._waiting = [(n, c) for n, c in self._waiting if c is not claim]

    def offer(self, job: Leased, now: float) -> None:
        """A job whose lease's caller is gone: to the longest-waiting lease call that names its
        queue, else held for the next one."""
        for names, claim in self._waiting:
            if job.name in names and not claim.done and not claim.abandoned:
                self.done_waiting(claim)
                claim.resolve(job)
                return
        self._unclaimed.append((job, now))


class WorkqSession(FifoSession[Pending[Reply]]):
    """One client connection's core plus the FIFO of callers awaiting replies.

    Args:
        desk: the client's :class:`LeaseDesk` (a new one when not given).
        max_fields, max_record_size: the core's caps on one ``inspect`` record
            (:class:`~workq_client._protocol.Connection`).
    """

    __slots__ = ("busy_until", "conn", "desk", "leases_out")
    closed_event = ConnectionClosed

    def __init__(
        self, desk: LeaseDesk | None = None, max_fields: int = MAX_FIELDS,
        max_record_size: int = MAX_RECORD_SIZE,
    ) -> None:
        super().__init__()
        self.conn = Connection(max_fields=max_fields, max_record_size=max_record_size)
        self.desk = desk if desk is not None else LeaseDesk()
        #: ``lease`` commands sent whose reply has not come (their jobs are still to be read).
        self.leases_out = 0
        #: Monotonic time by which the blocking commands sent will have ended (0.0: none left).
        self.busy_until = 0.0

    def held_back(self) -> float:
        """Seconds the server may still spend on blocking commands sent before the next one
        (``lease``/``result``/``run`` wait in order on one connection)."""
        if not self.busy_until:
            return 0.0
        left = self.busy_until - time.monotonic() if self._fifo else 0.0
        if left <= 0.0:
            self.busy_until = 0.0  # they have ended (or been answered): back to the fast path
            return 0.0
        return left

    def submit(self, command: Command) -> Pending[Reply]:
        """Queue ``command`` for sending and return its Pending.

        A ``lease`` is answered from the desk at once when it holds a job for one of its names
        (nothing is sent); otherwise the Pending returned is its caller's claim, which a job
        freed by an abandoned lease may fill first (the lease sent then hands its own reply on).

        Raises:
            ConnectionLost: the connection is already broken or closed.
        """
        if self.broken is not None:
            self.check_usable()  # raises
        if isinstance(command, Lease):
            return self._submit_lease(command)
        self.queue(self.conn.send(command))
        hold = command.wait_ms + command.ttr_ms if isinstance(command, Run) else command.wait_ms
        if hold:
            self._hold(hold)
        pending: Pending[Reply] = Pending(command.verb)
        self._fifo.append(pending)
        return pending

    def _hold(self, hold_ms: int) -> None:
        """A command that the server may hold back ``hold_ms`` was queued: so may every later
        one, until the commands before it and it are done."""
        now = time.monotonic()
        start = self.busy_until if self.in_flight and self.busy_until > now else now
        self.busy_until = start + hold_ms / 1000

    def _submit_lease(self, command: Lease) -> Pending[Reply]:
        names = frozenset(command.names)
        held = self.desk.take(names, time.monotonic())
        if held is not None:
            claim: Pending[Reply] = Pending(command.verb)
            claim.resolve(held)
            return claim
        self.queue(self.conn.send(command))
        if command.wait_ms:
            self._hold(command.wait_ms)
        pending: Pending[Reply] = Pending(command.verb)
        self._fifo.append(pending)
        claim = Pending(command.verb)
        self.desk.wait(names, claim)
        self.leases_out += 1
        pending.then = lambda answered: self._lease_answered(answered, claim)
        return claim

    def _lease_answered(self, answered: Pending[Reply], claim: Pending[Reply]) -> None:
        self.leases_out -= 1
        self.desk.done_waiting(claim)
        open_claim = not claim.done and not claim.abandoned
        if answered.error is not None:
            if open_claim:
                claim.reject(answered.error)
            return
        reply = answered.reply
        if open_claim:
            claim.resolve(reply)  # type: ignore[arg-type]
        elif isinstance(reply, Leased):
            self.desk.offer(reply, time.monotonic())

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the socket (``b""`` at EOF); complete every Pending they answer.

        Bare ``+OK`` replies (add, complete, fail, delete) take a short path through the core
        (``Connection.receive_oks``); anything else is parsed event by event."""
        count = self.conn.receive_oks(data) if self.broken is None else 0
        if not count:
            super().receive_data(data)
            return
        popleft = self._fifo.popleft
        for _ in range(count):
            popleft().resolve(OK)

    def dispatch(self, event: Reply) -> None:
        """Complete the oldest Pending with ``event``: its reply, or a typed error."""
        pending = self._fifo.popleft()
        if isinstance(event, ErrorReply):
            pending.reject(error_for(event))
        else:
            pending.resolve(event)
