"""Matching a Gearman connection's packets to callers (no I/O): the session the shared
transports (:mod:`jobwire._transport`) drive.

Answers (JOB_CREATED, STATUS_RES, NO_JOB/JOB_ASSIGN*, ...) complete :class:`Pending` objects in
the order the requests were sent, as the core checks. A foreground job is one object from submit
to result: its :class:`JobTracker` (a Pending of the result) waits in that order for JOB_CREATED,
which files it under the job's handle (several when coalesced jobs share a handle on one
connection); the WORK_* packets of that handle then go to it: the updates to its callback,
WORK_COMPLETE / WORK_FAIL / WORK_EXCEPTION complete it. NOOP and unmatched ERRORs go to
callbacks (workers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from jobwire._pending import Pending
from jobwire._session import FifoSession
from jobwire.errors import JobwireError, LocalProtocolError

from . import _admin as adm
from . import _packets as pk
from ._events import Answer, ConnectionClosed, Unanswered
from ._protocol import ANSWERS, Connection
from .errors import JobException, JobFailed, server_error

__all__ = ["FOREGROUND", "AdminSession", "GearmanSession", "JobTracker", "Update"]

logger = logging.getLogger("gearman_client")

Update = pk.WorkData | pk.WorkWarning | pk.WorkStatus


class JobTracker(Pending[bytes]):
    """A foreground job this connection submitted: the Pending of its result (WORK_COMPLETE's
    data; ``JobFailed``, ``JobException``, or the error that refused the submit), its handle
    once JOB_CREATED names it, and the callback for its updates."""

    __slots__ = ("handle", "on_update", "warning")

    def __init__(self, on_update: Callable[[Update], None] | None = None) -> None:
        Pending.__init__(self, "job")
        self.on_update = on_update
        #: Set once JOB_CREATED names the job.
        self.handle: bytes | None = None
        #: The data of the job's last WORK_WARNING (given to ``JobFailed``).
        self.warning: bytes | None = None


#: The submits whose job sends WORK_* packets back to the connection (answered JOB_CREATED).
FOREGROUND: frozenset[type[pk.Packet]] = frozenset(
    {pk.SubmitJob, pk.SubmitJobHigh, pk.SubmitJobLow, pk.SubmitReduceJob}
)


class GearmanSession(FifoSession[Pending[Any]]):
    """One connection's core, outgoing bytes, and the callers waiting on it: answers complete
    Pendings in FIFO order, WORK_* packets go to the trackers of their handle."""

    closed_event = ConnectionClosed

    def __init__(self, *, max_body_size: int = pk.DEFAULT_MAX_BODY_SIZE) -> None:
        super().__init__()
        self.conn = Connection(max_body_size=max_body_size)
        self.jobs: dict[bytes, list[JobTracker]] = {}
        #: Called on NOOP (a worker's wake-up).
        self.on_noop: Callable[[], None] | None = None
        #: Called with an ERROR that answers no request (JOB_NOT_FOUND to a late result).
        self.on_error: Callable[[pk.Error], None] | None = None

    def request(self, packet: pk.Packet) -> Pending[Any]:
        """Queue ``packet``; return the Pending its answer completes (a request without answer
        gets an already-resolved Pending).

        Raises:
            ConnectionLost: the connection is broken.
            LocalProtocolError: the packet is invalid (nothing queued).
        """
        if self.broken is not None:
            self.check_usable()
        self.queue(self.conn.send(packet))
        pending: Pending[Any] = Pending(type(packet).__name__)
        if type(packet) in ANSWERS:
            self._fifo.append(pending)
        else:
            pending.resolve(None)
        return pending

    def submit(
        self, packet: pk.Packet, on_update: Callable[[Update], None] | None = None
    ) -> JobTracker:
        """Queue a foreground submit; return its job's result (a :class:`JobTracker`, which
        JOB_CREATED registers under the job's handle; an ERROR answer rejects it).

        Raises:
            ConnectionLost: the connection is broken.
            LocalProtocolError: the packet is invalid or not a foreground submit (nothing
                queued).
        """
        if type(packet) not in FOREGROUND:
            raise LocalProtocolError(f"{type(packet).__name__} is not a foreground submit")
        if self.broken is not None:
            self.check_usable()
        self.queue(self.conn.send(packet))
        tracker = JobTracker(on_update)
        self._fifo.append(tracker)
        return tracker

    def track(self, handle: bytes, tracker: JobTracker) -> None:
        """Route the WORK_* packets of ``handle`` to ``tracker``."""
        tracker.handle = handle
        trackers = self.jobs.get(handle)
        if trackers is None:
            self.jobs[handle] = [tracker]
        else:
            trackers.append(tracker)

    def untrack(self, handle: bytes, tracker: JobTracker) -> None:
        """Forget ``tracker`` (its caller gave up, or it is done)."""
        trackers = self.jobs.get(handle)
        if trackers and tracker in trackers:
            trackers.remove(tracker)
            if not trackers:
                del self.jobs[handle]

    def drop_trackers(self, results: list[JobTracker]) -> None:
        """Forget these (abandoned) jobs."""
        wanted = {id(r) for r in results}
        for handle in list(self.jobs):
            kept = [t for t in self.jobs[handle] if id(t) not in wanted]
            if kept:
                self.jobs[handle] = kept
            else:
                del self.jobs[handle]

    def dispatch(self, event: Answer | Unanswered | pk.Packet) -> None:
        """An answer completes the oldest Pending (JOB_CREATED registers a foreground job's
        tracker instead); an option the server went past completes its Pending with ``None``;
        NOOP, an unmatched ERROR and WORK_* packets go to the worker's callbacks and the job
        trackers."""
        if type(event) is Unanswered:
            skipped = self._fifo.popleft()
            logger.debug("the server did not answer %r", event.request)
            if not skipped.done:
                skipped.resolve(None)
        elif type(event) is Answer:
            pending = self._fifo.popleft()
            reply = event.reply
            if type(reply) is pk.Error:
                if not pending.done:
                    pending.reject(server_error(reply.code, reply.text))
            elif type(pending) is JobTracker:  # JOB_CREATED: file the job under its handle
                if not pending.abandoned:  # (its caller gave up meanwhile: nobody listens)
                    self.track(reply.handle, pending)  # type: ignore[attr-defined]
            else:
                pending.resolve(reply)
        elif type(event) is pk.WorkComplete:
            trackers = self.jobs.pop(event.handle, None)
            if trackers is not None:
                for tracker in trackers:
                    tracker.resolve(event.data)
        elif type(event) is pk.Noop:
            if self.on_noop is not None:
                self.on_noop()
        elif type(event) is pk.Error:
            if self.on_error is not None:
                self.on_error(event)
        else:
            self._work(event)  # type: ignore[arg-type]

    def _work(self, packet: pk.Packet) -> None:
        handle: bytes = packet.handle  # type: ignore[attr-defined]
        trackers = self.jobs.get(handle)
        if not trackers:
            return
        if isinstance(packet, (pk.WorkData, pk.WorkWarning, pk.WorkStatus)):
            for tracker in trackers:
                if isinstance(packet, pk.WorkWarning):
                    tracker.warning = packet.data
                if tracker.on_update is not None:
                    try:
                        tracker.on_update(packet)
                    except Exception:  # a caller's callback must not break the connection
                        logger.exception("on_update callback raised for job %r", handle)
            return
        del self.jobs[handle]
        for tracker in trackers:
            if isinstance(packet, pk.WorkComplete):
                tracker.resolve(packet.data)
            elif isinstance(packet, pk.WorkException):
                tracker.reject(JobException(handle, packet.data))
            else:
                tracker.reject(JobFailed(handle, tracker.warning))

    def fail(self, error: JobwireError) -> None:
        """Fail every waiting request and every tracked job with ``error``."""
        super().fail(error)
        jobs, self.jobs = self.jobs, {}
        for handle, trackers in jobs.items():
            for tracker in trackers:  # same error type: a protocol error stays one
                tracker.reject(type(error)(f"while job {handle!r} ran: {error}"))


class AdminSession(FifoSession[Pending[Any]]):
    """An admin (text protocol) connection's core and its FIFO of callers."""

    closed_event = ConnectionClosed

    def __init__(
        self, *, max_list_lines: int = adm.MAX_LIST_LINES, max_list_size: int = adm.MAX_LIST_SIZE
    ) -> None:
        super().__init__()
        self.conn = adm.AdminConnection(max_list_lines=max_list_lines, max_list_size=max_list_size)

    def request(self, command: adm.AdminCommand) -> Pending[adm.AdminReply]:
        """Queue ``command``; return the Pending its answer completes.

        Raises:
            ConnectionLost: the connection is broken.
            LocalProtocolError: the command is invalid (nothing queued).
        """
        self.check_usable()
        self.queue(self.conn.send(command))
        pending: Pending[adm.AdminReply] = Pending(type(command).__name__)
        self.expect(pending)
        return pending

    def dispatch(self, event: tuple[adm.AdminCommand, adm.AdminReply]) -> None:
        """Complete the oldest Pending with its answer."""
        self._fifo.popleft().resolve(event[1])
