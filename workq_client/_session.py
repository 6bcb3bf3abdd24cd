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
of the client, which gives it to the next ``lease`` call naming its queue.

**No lease of a call that has its job.** A ``lease`` call made while an abandoned lease is out on
the connection sends nothing at first: it takes that lease over. The server answers one
connection's commands in order, so a lease sent behind the abandoned one could not start before
it ended anyway; and a call that got the abandoned lease's job while its own lease was out would
leave that lease on the server, hidden: taking the next job for nobody (to a dead connection once
the client closed) and holding every later call back. So the call gets the abandoned lease's job
if it is of one of its names; once no abandoned lease is left, a call still without a job sends
its own lease for what is left of its wait (at least :data:`MIN_LEASE_WAIT_MS`). A job is only
ever handed to a call that has no lease of its own out; a call whose own lease ends in
``-TIMEOUT`` takes a job held for its names instead, if there is one.
"""

from __future__ import annotations

import math
import time
from collections import deque

from jobwire._pending import Pending
from jobwire._record import replace
from jobwire._session import FifoSession
from jobwire.errors import JobwireError

from ._commands import MIN_LEASE_WAIT_MS, Command, Lease, Run
from ._events import ConnectionClosed, ErrorReply, Leased, Reply
from ._protocol import MAX_FIELDS, MAX_RECORD_SIZE, Connection
from .errors import TimedOut, error_for

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
                return replace(job, ttr_ms=left_ms)
        return None

    def wait(self, names: frozenset[str], claim: Pending[Reply]) -> None:
        """Register a lease call waiting on ``claim`` for a job of one of ``names`` (a call with
        no lease of its own out: the session's deferred calls)."""
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

    __slots__ = ("_deferred", "_wire_claims", "busy_until", "desk", "leases_out")
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
        # The claims of those leases, in the order sent (a claim abandoned by its caller marks
        # an abandoned lease).
        self._wire_claims: deque[Pending[Reply]] = deque()
        # Lease calls waiting for the abandoned leases to end: (command, monotonic deadline of
        # their own wait, claim), oldest first.
        self._deferred: list[tuple[Lease, float, Pending[Reply]]] = []
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

    @property
    def abandoned_leases(self) -> int:
        """Leases sent whose callers gave up and whose replies have not come."""
        return sum(1 for claim in self._wire_claims if claim.abandoned)

    def _submit_lease(self, command: Lease) -> Pending[Reply]:
        names = frozenset(command.names)
        now = time.monotonic()
        held = self.desk.take(names, now)
        claim: Pending[Reply] = Pending(command.verb)
        if held is not None:
            claim.resolve(held)
        elif any(wired.abandoned for wired in self._wire_claims):
            # Take the abandoned leases over (module docstring): nothing sent yet.
            self._deferred.append((command, now + command.wait_ms / 1000, claim))
            self.desk.wait(names, claim)
        else:
            self._send_lease(command, claim)
        return claim

    def _send_lease(self, command: Lease, claim: Pending[Reply]) -> None:
        self.queue(self.conn.send(command))
        if command.wait_ms:
            self._hold(command.wait_ms)
        pending: Pending[Reply] = Pending(command.verb)
        self._fifo.append(pending)
        self._wire_claims.append(claim)
        self.leases_out += 1
        names = frozenset(command.names)
        pending.then = lambda answered: self._lease_answered(answered, claim, names)

    def _lease_answered(
        self, answered: Pending[Reply], claim: Pending[Reply], names: frozenset[str]
    ) -> None:
        self.leases_out -= 1
        self._wire_claims.remove(claim)
        reply = answered.reply
        if claim.done or claim.abandoned:
            if isinstance(reply, Leased):
                self.desk.offer(reply, time.monotonic())
        elif answered.error is None:
            claim.resolve(reply)  # type: ignore[arg-type]
        else:
            held = (self.desk.take(names, time.monotonic())
                    if isinstance(answered.error, TimedOut) else None)
            if held is not None:
                claim.resolve(held)
            else:
                claim.reject(answered.error)
        if self._deferred and self.broken is None:
            self._send_deferred()

    def _send_deferred(self) -> None:
        """Once no abandoned lease is left, send the lease of each deferred call still without
        a job, for what is left of its wait (the reader flushes it)."""
        if any(wired.abandoned for wired in self._wire_claims):
            return
        deferred, self._deferred = self._deferred, []
        now = time.monotonic()
        for command, deadline, claim in deferred:
            self.desk.done_waiting(claim)
            if claim.done or claim.abandoned:
                continue
            held = self.desk.take(frozenset(command.names), now)
            if held is not None:
                claim.resolve(held)
                continue
            left_ms = max(math.ceil((deadline - now) * 1000), MIN_LEASE_WAIT_MS)
            self._send_lease(Lease(command.names, min(left_ms, command.wait_ms)), claim)

    def fail(self, error: JobwireError) -> None:
        """As :meth:`FifoSession.fail`, and the deferred lease calls get ``error`` too."""
        super().fail(error)
        deferred, self._deferred = self._deferred, []
        for _, _, claim in deferred:
            self.desk.done_waiting(claim)
            if not claim.done:
                claim.reject(type(error)(str(error)))

    def dispatch(self, event: Reply) -> None:
        """Complete the oldest Pending with ``event``: its reply, or a typed error."""
        pending = self._fifo.popleft()
        if isinstance(event, ErrorReply):
            pending.reject(error_for(event))
        else:
            pending.resolve(event)
