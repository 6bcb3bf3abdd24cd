"""The bundled server's pure state, driven by a fake clock."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timezone

from workq_client._commands import (
    Add,
    Complete,
    Delete,
    Fail,
    InspectJob,
    InspectJobs,
    InspectQueue,
    InspectQueues,
    InspectScheduledJobs,
    InspectServer,
    Lease,
    Result,
    Run,
    Schedule,
)
from workq_client._events import (
    NEED_DATA,
    OK,
    ErrorKind,
    ErrorReply,
    InspectReply,
    JobResult,
    Leased,
)
from workq_client._records import JobState, job_info, queue_info, server_info
from workq_client.server._state import ConnState, ServerState

T0 = 1_900_000_000.0
TIMEOUT = ErrorReply(ErrorKind.TIMEOUT)
NOT_FOUND = ErrorReply(ErrorKind.NOT_FOUND)


def new_id() -> str:
    return str(uuid.uuid4())


class World:
    def __init__(self) -> None:
        self.now = T0
        self.state = ServerState(T0, rng=random.Random(7))
        self.woken: list[ConnState] = []

    def conn(self) -> ConnState:
        conn = self.state.connect(self.now)
        conn.on_reply = lambda: self.woken.append(conn)
        return conn

    def run(self, conn: ConnState, command: object) -> object:
        return self.state.execute(conn, command, self.now)  # type: ignore[arg-type]

    def take(self, conn: ConnState, names: tuple[str, ...]) -> object:
        """``lease`` with the smallest wait that leases (1 ms; 0 never does): a ready job, or
        ``-TIMEOUT`` at once when none is ready (the wait is ended without moving the clock)."""
        reply = self.run(conn, Lease(names, 1))
        if reply is None:
            self.state.half_close(conn, self.now)
            reply, conn.reply = conn.reply, None
        return reply

    def tick(self, seconds: float) -> None:
        self.now += seconds
        self.state.advance(self.now)

    def info(self, conn: ConnState, job_id: str):  # type: ignore[no-untyped-def]
        reply = self.run(conn, InspectJob(job_id))
        assert isinstance(reply, InspectReply)
        return job_info(reply.records[0])


def test_a_lease_waiting_0_ms_never_leases_as_on_workq_and_1_ms_does() -> None:
    """Workq 0.2.0 measured: 0 of 20 leases with a 0 ms wait took one of 100 ready jobs (its
    timer beats the hand-off); with 1 ms, 20 of 20 did."""
    w = World()
    c = w.conn()
    ids = [new_id() for _ in range(20)]
    for job_id in ids:
        w.run(c, Add("q", b"", 1000, 60000, job_id=job_id))
    assert [w.run(c, Lease(("q",), 0)) for _ in range(20)] == [TIMEOUT] * 20
    assert queue_info(w.run(c, InspectQueue("q")).records[0]).ready_len == 20  # type: ignore[attr-defined]
    assert [w.run(c, Lease(("q",), 1)).job_id for _ in range(20)] == ids  # type: ignore[attr-defined]


def test_priority_then_age_ordering_and_inspect_jobs_order() -> None:
    w = World()
    c = w.conn()
    ids = [new_id() for _ in range(4)]
    for job_id, prio in zip(ids, [0, 5, -3, 5], strict=True):
        assert w.run(c, Add("q", job_id.encode(), 1000, 60000, prio, job_id=job_id)) == OK
    listed = w.run(c, InspectJobs("q", 0, 10))
    assert isinstance(listed, InspectReply)
    assert [r.key for r in listed.records] == [ids[1], ids[3], ids[0], ids[2]]
    page = w.run(c, InspectJobs("q", 1, 2))
    assert isinstance(page, InspectReply) and [r.key for r in page.records] == [ids[3], ids[0]]
    leased = [w.take(c, ("q",)) for _ in range(4)]
    assert [x.job_id for x in leased] == [ids[1], ids[3], ids[0], ids[2]]  # type: ignore[attr-defined]
    assert w.take(c, ("q",)) == TIMEOUT
    assert queue_info(w.run(c, InspectQueue("q")).records[0]).ready_len == 0  # type: ignore[attr-defined]


def test_ttr_expiry_requeues_until_max_attempts() -> None:
    w = World()
    c = w.conn()
    job_id = new_id()
    w.run(c, Add("q", b"p", 1000, 60000, max_attempts=2, job_id=job_id))
    assert isinstance(w.take(c, ("q",)), Leased)
    assert w.info(c, job_id).state is JobState.LEASED
    w.tick(0.999)
    assert w.take(c, ("q",)) == TIMEOUT
    w.tick(0.002)
    info = w.info(c, job_id)
    assert info.state is JobState.PENDING and info.attempts == 1
    assert isinstance(w.take(c, ("q",)), Leased)
    w.tick(1.01)
    info = w.info(c, job_id)
    assert info.state is JobState.FAILED and info.attempts == 2
    assert w.run(c, Result(job_id)) == JobResult(job_id, False, b"")
    assert w.take(c, ("q",)) == TIMEOUT


def test_max_fails_is_enforced_and_zero_means_first_fail_is_final() -> None:
    w = World()
    c = w.conn()
    retry, final = new_id(), new_id()
    w.run(c, Add("q", b"", 5000, 60000, max_fails=2, job_id=retry))
    w.take(c, ("q",))
    assert w.run(c, Fail(retry, b"e1")) == OK
    info = w.info(c, retry)
    assert info.state is JobState.PENDING and info.fails == 1
    assert w.run(c, Result(retry)) == TIMEOUT
    w.take(c, ("q",))
    assert w.run(c, Fail(retry, b"e2")) == OK
    assert w.info(c, retry).state is JobState.FAILED
    assert w.run(c, Result(retry)) == JobResult(retry, False, b"e2")
    assert w.run(c, Fail(retry, b"e3")) == ErrorReply(ErrorKind.CLIENT_ERROR, "Duplicate result")
    w.run(c, Add("q", b"", 5000, 60000, job_id=final))
    w.take(c, ("q",))
    w.run(c, Fail(final, b"boom"))
    assert w.run(c, Result(final)) == JobResult(final, False, b"boom")
    # As on Workq 0.2.0: without max-fails a fail is not counted, and it is final.
    info = w.info(c, final)
    assert info.state is JobState.FAILED and info.fails == 0
    assert w.info(c, retry).fails == 2


def test_ttl_evicts_jobs_and_results_and_counts_incomplete_ones() -> None:
    w = World()
    c = w.conn()
    done, pending = new_id(), new_id()
    w.run(c, Add("q", b"", 1000, 2000, job_id=done))
    w.run(c, Add("q", b"", 1000, 3000, job_id=pending))
    w.take(c, ("q",))
    w.run(c, Complete(done, b"ok"))
    w.tick(2.5)
    assert w.run(c, Result(done)) == NOT_FOUND
    assert w.run(c, Add("q", b"", 1000, 2000, job_id=done)) == OK  # the id is free again
    w.tick(1)
    assert w.run(c, InspectJob(pending)) == NOT_FOUND
    server = server_info(w.run(c, InspectServer()).records[0])  # type: ignore[attr-defined]
    assert server.evicted_jobs == 1 and server.active_clients == 1


def test_duplicate_ids_even_after_completion() -> None:
    w = World()
    c = w.conn()
    job_id = new_id()
    w.run(c, Add("q", b"", 1000, 60000, job_id=job_id))
    dup = ErrorReply(ErrorKind.CLIENT_ERROR, "Duplicate job")
    assert w.run(c, Add("q", b"", 1000, 60000, job_id=job_id)) == dup
    w.run(c, Complete(job_id, b""))
    assert w.run(c, Schedule("q", b"", 1, 1, datetime(2099, 1, 1, tzinfo=timezone.utc),
                             job_id=job_id)) == dup
    assert w.run(c, Run("q", b"", 1, 1, job_id=job_id)) == dup


def test_scheduled_jobs_become_ready_at_their_time_and_ttl_counts_from_it() -> None:
    w = World()
    c, worker = w.conn(), w.conn()
    job_id = new_id()
    when = datetime.fromtimestamp(T0 + 10, timezone.utc)
    assert w.run(c, Schedule("s", b"x", 60000, 5000, when, job_id=job_id)) == OK
    sched = w.run(c, InspectScheduledJobs("s", 0, 10))
    assert isinstance(sched, InspectReply) and len(sched.records) == 1
    assert job_info(sched.records[0]).time == when
    assert w.run(c, InspectJobs("s", 0, 10)) == InspectReply(())
    assert w.run(worker, Lease(("s",), 20000)) is None
    w.tick(9.9)
    assert worker.reply is None
    w.tick(0.2)
    assert isinstance(worker.take_reply(), Leased) and w.woken == [worker]
    w.tick(4)  # 14.1 s after scheduling, 4.1 s after its time: within the TTL
    assert w.info(c, job_id).state is JobState.LEASED
    w.tick(1)
    assert w.run(c, InspectJob(job_id)) == NOT_FOUND
    past = new_id()
    w.run(c, Schedule("s", b"", 1000, 5000, datetime.fromtimestamp(w.now - 1, timezone.utc),
                      job_id=past))
    assert w.take(c, ("s",)).job_id == past  # type: ignore[attr-defined]


def test_blocking_lease_on_several_names_is_served_by_a_later_add() -> None:
    w = World()
    producer, worker = w.conn(), w.conn()
    assert w.run(worker, Lease(("a", "b"), 5000)) is None
    job_id = new_id()
    w.run(producer, Add("b", b"hi", 1000, 60000, job_id=job_id))
    assert worker.take_reply() == Leased(job_id, "b", 1000, b"hi")
    # The served lease no longer waits on "a".
    w.run(producer, Add("a", b"", 1000, 60000))
    assert worker.reply is None
    assert w.run(worker, Lease(("zzz",), 1000)) is None
    w.tick(1.001)
    assert worker.take_reply() == TIMEOUT


def test_lease_over_several_names_picks_among_them() -> None:
    w = World()
    c = w.conn()
    for _ in range(20):
        w.run(c, Add("a", b"", 1000, 60000))
        w.run(c, Add("b", b"", 1000, 60000))
    names = {w.take(c, ("a", "b")).name for _ in range(20)}  # type: ignore[attr-defined]
    assert names == {"a", "b"}


def test_run_is_answered_by_complete_and_by_timeouts() -> None:
    w = World()
    client, worker = w.conn(), w.conn()
    # Completed in time: the run gets the result, and its job goes with it.
    job_id = new_id()
    assert w.run(client, Run("r", b"in", 2000, 5000, job_id=job_id)) is None
    leased = w.take(worker, ("r",))
    assert leased == Leased(job_id, "r", 2000, b"in")
    w.tick(1)
    assert w.run(worker, Complete(job_id, b"out")) == OK
    assert client.take_reply() == JobResult(job_id, True, b"out")
    assert w.run(client, Result(job_id)) == NOT_FOUND
    assert w.run(worker, Complete(job_id, b"again")) == NOT_FOUND
    # Nobody leases it: -TIMEOUT after the wait, and the job is gone.
    job3 = new_id()
    w.run(client, Run("r", b"", 2000, 500, job_id=job3))
    w.tick(0.6)
    assert client.take_reply() == TIMEOUT
    assert w.run(worker, InspectJob(job3)) == NOT_FOUND
    assert w.take(worker, ("r",)) == TIMEOUT
    # wait-timeout 0 with nobody waiting: at once.
    assert w.run(client, Run("r", b"", 2000, 0)) == TIMEOUT
    assert queue_info(w.run(client, InspectQueue("r")).records[0]).ready_len == 0  # type: ignore[attr-defined]


def test_run_outlives_a_ttr_overrun_and_takes_the_late_result() -> None:
    """Workq 0.2.0: the run's job is requeued when its TTR runs out (even leased again), a late
    ``complete`` is accepted while the run waits, and the run succeeds with it."""
    w = World()
    client, slow, other = w.conn(), w.conn(), w.conn()
    job_id = new_id()
    assert w.run(client, Run("r", b"in", 1000, 5000, job_id=job_id)) is None
    info = w.info(other, job_id)
    assert (info.ttl, info.max_attempts) == (0, 0)  # what the real server shows for a run
    assert isinstance(w.take(slow, ("r",)), Leased)
    w.tick(1.5)
    assert client.reply is None
    info = w.info(other, job_id)
    assert info.state is JobState.PENDING and info.attempts == 1
    assert w.take(other, ("r",)) == Leased(job_id, "r", 1000, b"in")
    assert w.info(other, job_id).attempts == 2
    assert w.run(slow, Complete(job_id, b"late")) == OK
    assert client.take_reply() == JobResult(job_id, True, b"late")
    assert w.run(other, Complete(job_id, b"mine")) == NOT_FOUND


def test_run_times_out_at_its_wait_or_at_the_ttr_of_the_lease_running_then() -> None:
    w = World()
    client, worker = w.conn(), w.conn()
    # Leased, overrun, requeued, never taken again: -TIMEOUT when the wait ends, not at the TTR.
    job_id = new_id()
    w.run(client, Run("r", b"", 1000, 3000, job_id=job_id))
    w.take(worker, ("r",))
    w.tick(2.9)
    assert client.reply is None and w.info(worker, job_id).state is JobState.PENDING
    w.tick(0.2)
    assert client.take_reply() == TIMEOUT
    assert w.run(worker, InspectJob(job_id)) == NOT_FOUND
    # Leased when the wait ends: the run waits out that lease's TTR.
    job2 = new_id()
    w.run(client, Run("r", b"", 1000, 2000, job_id=job2))
    w.tick(1.5)
    w.take(worker, ("r",))  # its TTR ends at 2.5 s
    w.tick(0.9)
    assert client.reply is None
    w.tick(0.2)
    assert client.take_reply() == TIMEOUT
    assert w.run(worker, InspectJob(job2)) == NOT_FOUND
    assert w.take(worker, ("r",)) == TIMEOUT  # not requeued
    assert w.run(worker, Complete(job2, b"")) == NOT_FOUND
    # ... and a result within that TTR still answers it.
    job3 = new_id()
    w.run(client, Run("r", b"", 1000, 500, job_id=job3))
    w.tick(0.4)
    w.take(worker, ("r",))
    w.tick(0.9)
    assert client.reply is None
    w.run(worker, Fail(job3, b"no"))
    assert client.take_reply() == JobResult(job3, False, b"no")


def test_run_is_leased_at_once_by_a_waiting_worker() -> None:
    w = World()
    client, worker = w.conn(), w.conn()
    w.run(worker, Lease(("r",), 5000))
    job_id = new_id()
    assert w.run(client, Run("r", b"x", 1000, 0, job_id=job_id)) is None
    assert worker.take_reply() == Leased(job_id, "r", 1000, b"x")
    w.run(worker, Fail(job_id, b"no"))
    assert client.take_reply() == JobResult(job_id, False, b"no")


def test_deleting_a_job_a_result_waits_on_times_it_out_when_its_wait_ends() -> None:
    """Workq 0.2.0 answers a ``result`` whose job was deleted (or evicted) ``-TIMEOUT``, when
    its wait ends."""
    w = World()
    waiter, admin = w.conn(), w.conn()
    job_id = new_id()
    w.run(admin, Add("q", b"", 1000, 60000, job_id=job_id))
    assert w.run(waiter, Result(job_id, 5000)) is None
    assert w.run(admin, Delete(job_id)) == OK
    assert w.run(admin, Delete(job_id)) == NOT_FOUND
    w.tick(4.9)
    assert waiter.reply is None
    w.tick(0.2)
    assert waiter.take_reply() == TIMEOUT
    evicted = new_id()
    w.run(admin, Add("q", b"", 1000, 1000, job_id=evicted))
    w.run(waiter, Result(evicted, 3000))
    w.tick(1.5)
    assert waiter.reply is None and w.run(admin, InspectJob(evicted)) == NOT_FOUND
    w.tick(1.6)
    assert waiter.take_reply() == TIMEOUT


def test_deleting_a_job_a_run_waits_on_times_the_run_out_when_its_wait_ends() -> None:
    """The real server crashes here (Controller.Run, when the wait ends); this one answers the
    run ``-TIMEOUT`` then, as it would a ``result``, and keeps serving everyone."""
    w = World()
    client, worker, admin = w.conn(), w.conn(), w.conn()
    job_id = new_id()
    w.run(client, Run("r", b"", 1000, 5000, job_id=job_id))
    assert w.run(admin, Delete(job_id)) == OK
    assert w.take(worker, ("r",)) == TIMEOUT
    assert w.run(worker, Complete(job_id, b"")) == NOT_FOUND
    w.tick(4.9)
    assert client.reply is None
    w.tick(0.2)
    assert client.take_reply() == TIMEOUT
    # Deleted while the run waits out a lease's TTR (its wait is over): -TIMEOUT at that TTR.
    job2 = new_id()
    w.run(client, Run("r", b"", 1000, 500, job_id=job2))
    w.tick(0.4)
    w.take(worker, ("r",))  # its TTR ends at 1.4 s
    w.tick(0.2)
    assert w.run(admin, Delete(job2)) == OK
    w.tick(0.7)
    assert client.reply is None
    w.tick(0.2)
    assert client.take_reply() == TIMEOUT
    w.tick(10)  # nothing fires twice
    assert client.reply is None
    assert isinstance(w.run(admin, InspectServer()), InspectReply)


def test_one_result_per_job_the_first_waiter_gets_it() -> None:
    """Workq 0.2.0 hands a job's result to one waiter; the others time out when their waits
    end. A ``result`` asked after the job finished gets it at once."""
    w = World()
    first, second, worker = w.conn(), w.conn(), w.conn()
    job_id = new_id()
    w.run(worker, Add("q", b"", 1000, 60000, job_id=job_id))
    assert w.run(first, Result(job_id, 5000)) is None
    w.tick(0.1)
    assert w.run(second, Result(job_id, 2000)) is None
    w.take(worker, ("q",))
    w.run(worker, Complete(job_id, b"r"))
    assert first.take_reply() == JobResult(job_id, True, b"r")
    assert second.reply is None
    assert w.run(worker, Result(job_id)) == JobResult(job_id, True, b"r")
    w.tick(2)
    assert second.take_reply() == TIMEOUT
    # A run is the first waiter on its job: a result waiting beside it times out.
    run_id = new_id()
    w.run(first, Run("r", b"", 1000, 5000, job_id=run_id))
    w.run(second, Result(run_id, 1000))
    w.take(worker, ("r",))
    w.run(worker, Complete(run_id, b"x"))
    assert first.take_reply() == JobResult(run_id, True, b"x")
    assert second.reply is None
    w.tick(1.1)
    assert second.take_reply() == TIMEOUT
    # A waiter that gave up (half-closed) does not take the result from the next one.
    third = new_id()
    w.run(worker, Add("q", b"", 1000, 60000, job_id=third))
    w.run(first, Result(third, 5000))
    w.run(second, Result(third, 5000))
    w.state.half_close(first, w.now)
    assert first.take_reply() == TIMEOUT
    w.run(worker, Complete(third, b"3"))
    assert second.take_reply() == JobResult(third, True, b"3")


def test_result_waits_for_completion_or_times_out() -> None:
    w = World()
    c, waiter = w.conn(), w.conn()
    job_id = new_id()
    w.run(c, Add("q", b"", 1000, 60000, job_id=job_id))
    assert w.run(waiter, Result(job_id, 0)) == TIMEOUT
    assert w.run(waiter, Result(job_id, 1000)) is None
    w.run(c, Complete(job_id, b"r"))
    assert waiter.take_reply() == JobResult(job_id, True, b"r")
    other = new_id()
    w.run(c, Add("q", b"", 1000, 60000, job_id=other))
    w.run(waiter, Result(other, 1000))
    w.tick(1.001)
    assert waiter.take_reply() == TIMEOUT


def test_complete_after_ttr_expiry_is_accepted_and_disconnect_drops_waits() -> None:
    w = World()
    c, worker = w.conn(), w.conn()
    job_id = new_id()
    w.run(c, Add("q", b"", 1000, 60000, job_id=job_id))
    w.take(worker, ("q",))
    w.tick(1.5)
    assert w.info(c, job_id).state is JobState.PENDING
    assert w.run(worker, Complete(job_id, b"late")) == OK
    assert w.take(c, ("q",)) == TIMEOUT  # no longer queued
    assert w.run(worker, Complete(new_id(), b"")) == NOT_FOUND
    w.run(worker, Lease(("q",), 5000))
    w.state.disconnect(worker, w.now)
    w.state.disconnect(worker, w.now)
    w.run(c, Add("q", b"", 1000, 60000))
    assert worker.reply is None
    assert queue_info(w.run(c, InspectQueue("q")).records[0]).ready_len == 1  # type: ignore[attr-defined]
    assert server_info(w.run(c, InspectServer()).records[0]).active_clients == 1  # type: ignore[attr-defined]


def test_inspect_queues_unknown_names_and_paging() -> None:
    w = World()
    c = w.conn()
    assert w.run(c, InspectQueue("none")) == NOT_FOUND
    assert w.run(c, InspectJobs("none", 0, 1)) == NOT_FOUND
    assert w.run(c, InspectScheduledJobs("none", 0, 1)) == NOT_FOUND
    for name in ["c", "a", "b"]:
        w.run(c, Add(name, b"", 1000, 60000))
    reply = w.run(c, InspectQueues(1, 5))
    assert isinstance(reply, InspectReply) and [r.key for r in reply.records] == ["b", "c"]
    assert w.run(c, InspectQueues(9, 5)) == InspectReply(())
    server = w.run(c, InspectServer())
    assert isinstance(server, InspectReply)
    assert server.encode().startswith(b"+OK 1\r\nserver 2\r\nactive-clients 1\r\n")
    # Workq's keys, then this server's own counts of waiting commands before "started".
    assert [key for key, _ in server.records[0].fields] == [
        "active-clients", "evicted-jobs", "waiting-leases", "waiting-runs", "waiting-results",
        "started"]


def test_half_close_answers_waits_and_keeps_a_run_job() -> None:
    w = World()
    worker, runner = w.conn(), w.conn()
    w.run(worker, Lease(("h",), 5000))
    job_id = new_id()
    w.run(runner, Run("h2", b"", 1000, 5000, job_id=job_id))
    w.state.half_close(worker, w.now)
    w.state.half_close(runner, w.now)
    assert worker.take_reply() == TIMEOUT and runner.take_reply() == TIMEOUT
    w.run(worker, Add("h", b"", 1000, 60000))
    assert worker.reply is None
    # The run's job lives on (a worker may still take it) until the run's wait ends.
    assert w.info(worker, job_id).state is JobState.NEW
    w.tick(4.9)
    assert w.take(worker, ("h2",)).job_id == job_id  # type: ignore[attr-defined]
    w.tick(0.2)
    assert w.info(worker, job_id).state is JobState.LEASED  # its TTR bounds it now
    w.tick(1)
    assert w.run(worker, InspectJob(job_id)) == NOT_FOUND
    assert runner.reply is None and worker.reply is None


def test_stale_heap_and_timer_entries_are_swept() -> None:
    w = World()
    c = w.conn()
    when = datetime.fromtimestamp(T0 + 3600, timezone.utc)
    for _ in range(3000):
        job_id = new_id()
        w.run(c, Schedule("s", b"", 1000, 60000, when, job_id=job_id))
        w.run(c, Delete(job_id))
        job_id = new_id()
        w.run(c, Add("r", b"", 1000, 60000, job_id=job_id))
        w.run(c, Delete(job_id))
    w.tick(0.001)
    assert len(w.state.queues["s"].scheduled) <= 64 + 1
    assert len(w.state.queues["r"].ready) <= 64 + 1
    assert len(w.state._timers) <= 1024 + 10


def test_sans_io_server_replays_the_transcript_byte_for_byte_with_a_fake_clock() -> None:
    """ServerConnection + ServerState, no sockets: every reply of the real server, timestamps
    included, once the clock reads what the real server's did."""
    from workq_client._events import ConnectionClosed
    from workq_client._server_protocol import BadRequest, ServerConnection

    from .test_core import EXCHANGES
    from .test_server import with_waiting_keys

    def at(stamp: str) -> float:
        return datetime.strptime(stamp, "%H:%M:%S").replace(
            year=2026, month=11, day=21, tzinfo=timezone.utc).timestamp()

    clock = {"add with flags": at("23:30:36"), "add payload with CRLF inside": at("23:30:37"),
             "schedule": at("23:30:43")}
    now = at("23:30:35")
    state = ServerState(now)
    conn = state.connect(now)
    proto = ServerConnection()
    for ex in EXCHANGES:
        now = clock.get(ex["note"], now)
        proto.receive_data(ex["send"].encode("latin-1"))
        out = b""
        while True:
            event = proto.next_event()
            if event is NEED_DATA:
                break
            if isinstance(event, ConnectionClosed):
                out += b"<EOF>"
                break
            if isinstance(event, BadRequest):
                out += event.reply.encode()
                continue
            reply = state.execute(conn, event, now)
            if reply is None:  # blocking: let its wait-timeout run out
                now += event.wait_ms / 1000
                state.advance(now)
                reply = conn.take_reply()
            assert reply is not None
            out += reply.encode()
        want = with_waiting_keys(ex["recv"].encode("latin-1"))  # and its own keys
        if ex["note"].startswith("wrong arg count"):  # the deliberate difference: no desync
            want = want.split(b"\r\n")[0] + b"\r\n"
        assert out == want, ex["note"]


def test_ready_order_is_priority_then_scheduled_time_then_age_as_in_workq() -> None:
    """Workq 0.2.0 orders a queue by priority, then scheduled time (none sorts first), then
    creation: a scheduled job that came due waits behind jobs added later."""
    w = World()
    c = w.conn()
    early = new_id()
    w.run(c, Schedule("o", b"", 1000, 60000, datetime.fromtimestamp(T0 + 1, timezone.utc),
                      job_id=early))
    w.run(c, Schedule("o", b"", 1000, 60000, datetime.fromtimestamp(T0 + 2, timezone.utc),
                      priority=5))
    w.tick(3)
    added = new_id()
    w.run(c, Add("o", b"", 1000, 60000, job_id=added))
    listed = w.run(c, InspectJobs("o", 0, 10))
    assert isinstance(listed, InspectReply)
    assert [r.key for r in listed.records][1:] == [added, early]
    w.take(c, ("o",))
    assert w.take(c, ("o",)).job_id == added  # type: ignore[attr-defined]
    # inspect scheduled-jobs: priority first, then time.
    late_high, soon_low = new_id(), new_id()
    w.run(c, Schedule("p", b"", 1000, 60000, datetime.fromtimestamp(T0 + 900, timezone.utc),
                      priority=9, job_id=late_high))
    w.run(c, Schedule("p", b"", 1000, 60000, datetime.fromtimestamp(T0 + 100, timezone.utc),
                      job_id=soon_low))
    sched = w.run(c, InspectScheduledJobs("p", 0, 10))
    assert isinstance(sched, InspectReply)
    assert [r.key for r in sched.records] == [late_high, soon_low]


def test_lease_creates_its_queues_as_workq_does() -> None:
    w = World()
    c = w.conn()
    assert w.run(c, InspectQueue("leased-only")) == NOT_FOUND
    assert w.take(c, ("leased-only", "other")) == TIMEOUT
    assert queue_info(w.run(c, InspectQueue("leased-only")).records[0]).ready_len == 0  # type: ignore[attr-defined]
    reply = w.run(c, InspectQueues(0, 10))
    assert isinstance(reply, InspectReply)
    assert [r.key for r in reply.records] == ["leased-only", "other"]


def test_attempts_are_capped_at_255_even_without_max_attempts() -> None:
    """Workq 0.2.0 requeues the 255th overrun, then fails the job at the next lease without
    handing it out; a waiting ``result`` is not told (it times out)."""
    w = World()
    c, waiter = w.conn(), w.conn()
    job_id = new_id()
    w.run(c, Add("cap", b"", 1, 60000, job_id=job_id))
    for _ in range(255):
        assert isinstance(w.take(c, ("cap",)), Leased)
        w.tick(0.002)
    info = w.info(c, job_id)
    assert info.state is JobState.PENDING and info.attempts == 255
    w.run(waiter, Result(job_id, 1000))
    assert w.take(c, ("cap",)) == TIMEOUT
    assert w.info(c, job_id).state is JobState.FAILED
    assert w.run(c, Result(job_id)) == JobResult(job_id, False, b"")
    assert w.run(c, Complete(job_id, b"")) == ErrorReply(ErrorKind.CLIENT_ERROR,
                                                         "Duplicate result")
    assert waiter.reply is None
    w.tick(1)
    assert waiter.take_reply() == TIMEOUT


def test_a_scheduled_jobs_ttl_counts_from_its_time_even_a_past_one() -> None:
    w = World()
    c = w.conn()
    past = new_id()
    when = datetime.fromtimestamp(T0 - 2, timezone.utc)
    assert w.run(c, Schedule("s", b"", 1000, 3000, when, job_id=past)) == OK
    w.tick(0.9)
    assert w.info(c, past).state is JobState.NEW
    w.tick(0.2)  # T0 - 2 + 3 s
    assert w.run(c, InspectJob(past)) == NOT_FOUND
    # A time so far back that the TTL is over already is refused, as Workq does.
    gone = Schedule("s", b"", 1000, 1000, datetime.fromtimestamp(T0 - 60, timezone.utc))
    assert w.run(c, gone) == ErrorReply(ErrorKind.CLIENT_ERROR, "Invalid time")
    assert w.run(c, InspectJob(gone.job_id)) == NOT_FOUND


def test_a_closed_connection_is_never_handed_a_job() -> None:
    """The deliberate difference: Workq 0.2.0 leases the next job to a waiting lease whose
    connection closed; here the lease ends with its connection."""
    w = World()
    gone, alive, producer = w.conn(), w.conn(), w.conn()
    w.run(gone, Lease(("c",), 60000))
    w.state.disconnect(gone, w.now)
    w.run(alive, Lease(("c",), 60000))
    job_id = new_id()
    w.run(producer, Add("c", b"", 1000, 60000, job_id=job_id))
    assert gone.reply is None
    assert alive.take_reply() == Leased(job_id, "c", 1000, b"")
    assert w.info(producer, job_id).attempts == 1
