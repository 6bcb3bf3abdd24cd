"""The bundled server's pure state, driven with a fake clock: timers, wake-ups, requeues,
coalescing and the exceptions option, without sockets or sleeping."""

from __future__ import annotations

from typing import Any

from gearman_client import _packets as pk
from gearman_client.server._state import Conn, ServerState


def make() -> tuple[ServerState, list[int]]:
    timers: list[int] = []
    state = ServerState(on_timer=lambda: timers.append(1), handle_prefix="H:t")
    return state, timers


def conn(state: ServerState, fd: int) -> Conn:
    c = Conn(fd, "127.0.0.1")
    state.connect(c)
    return c


def received(c: Conn) -> list[Any]:
    """Every packet queued for ``c`` so far, then cleared."""
    data, c.out[:] = bytes(c.out), b""
    out = []
    decoder = pk.PacketDecoder(pk.RES)
    decoder.feed(data)
    while (packet := decoder.next_packet()) is not None:
        out.append(packet)
    assert decoder.buffered == 0
    return out


def test_epoch_job_waits_for_its_time_and_wakes_the_sleeper() -> None:
    state, timers = make()
    client, worker = conn(state, 1), conn(state, 2)
    state.handle(worker, pk.CanDo(b"f"), 0.0)
    state.handle(worker, pk.PreSleep(), 0.0)
    assert received(worker) == []
    state.handle(client, pk.SubmitJobEpoch(b"f", b"", 100, b"later"), 50.0)
    assert received(client) == [pk.JobCreated(b"H:t:1")]
    assert timers and state.next_timer() == 100.0
    state.handle(worker, pk.GrabJobUniq(), 60.0)
    assert received(worker) == [pk.NoJob()]  # not due yet
    state.handle(worker, pk.PreSleep(), 60.0)
    state.tick(99.9)
    assert received(worker) == []
    state.tick(100.0)
    assert received(worker) == [pk.Noop()]  # gearmand 1.1.20 would not send this
    state.handle(worker, pk.GrabJobUniq(), 100.1)
    assert received(worker) == [pk.JobAssignUniq(b"H:t:1", b"f", b"", b"later")]


def test_can_do_timeout_requeues_silently_after_at_least_a_second() -> None:
    state, _ = make()
    client, worker, other = conn(state, 1), conn(state, 2), conn(state, 3)
    state.handle(worker, pk.CanDoTimeout(b"f", 10), 0.0)  # 10 ms: raised to 1000 ms
    state.handle(other, pk.CanDo(b"f"), 0.0)
    state.handle(other, pk.PreSleep(), 0.0)
    state.handle(client, pk.SubmitJob(b"f", b"", b"x"), 0.0)
    assert received(other) == [pk.Noop()]
    state.handle(worker, pk.GrabJob(), 0.0)
    assert received(worker) == [pk.JobAssign(b"H:t:1", b"f", b"x")]
    state.handle(other, pk.PreSleep(), 0.5)
    state.tick(0.9)
    assert state.jobs[b"H:t:1"].worker is worker
    state.tick(1.0)
    assert state.jobs[b"H:t:1"].worker is None
    assert received(other) == [pk.Noop()]  # the requeued job wakes sleepers
    assert received(client) == [pk.JobCreated(b"H:t:1")]  # and the client hears nothing
    state.handle(worker, pk.WorkComplete(b"H:t:1", b"late"), 2.0)
    assert received(worker) == [pk.Error(b"JOB_NOT_FOUND", b"Job given in work result not found")]
    state.handle(other, pk.GrabJobUniq(), 2.0)
    assert received(other)[0].handle == b"H:t:1"


def test_worker_disconnect_requeues_at_the_front() -> None:
    state, _ = make()
    client, worker = conn(state, 1), conn(state, 2)
    state.handle(worker, pk.CanDo(b"f"), 0.0)
    for data in (b"a", b"b"):
        state.handle(client, pk.SubmitJobBg(b"f", b"", data), 0.0)
    state.handle(worker, pk.GrabJob(), 0.0)
    assert received(worker)[0].data == b"a"
    state.disconnect(worker, 1.0)
    again = conn(state, 3)
    state.handle(again, pk.CanDo(b"f"), 1.0)
    state.handle(again, pk.GrabJob(), 1.0)
    assert received(again)[0].data == b"a"


def test_coalesced_clients_all_get_updates_and_the_exceptions_option_decides() -> None:
    state, _ = make()
    a, b, worker = conn(state, 1), conn(state, 2), conn(state, 3)
    state.handle(a, pk.OptionReq(b"exceptions"), 0.0)
    state.handle(a, pk.SubmitJob(b"f", b"u", b"1"), 0.0)
    state.handle(b, pk.SubmitJob(b"f", b"u", b"2"), 0.0)
    assert received(a)[-1] == received(b)[-1] == pk.JobCreated(b"H:t:1")
    state.handle(worker, pk.CanDo(b"f"), 0.0)
    state.handle(worker, pk.GrabJobUniq(), 0.0)
    assert received(worker) == [pk.JobAssignUniq(b"H:t:1", b"f", b"u", b"1")]
    state.handle(worker, pk.WorkStatus(b"H:t:1", 1, 2), 0.0)
    state.handle(c := conn(state, 4), pk.GetStatusUnique(b"u"), 0.0)
    assert received(c) == [pk.StatusResUnique(b"u", True, True, 1, 2, 2)]
    state.handle(worker, pk.WorkException(b"H:t:1", b"boom"), 0.0)
    assert received(a) == [pk.WorkStatus(b"H:t:1", 1, 2), pk.WorkException(b"H:t:1", b"boom")]
    assert received(b) == [pk.WorkStatus(b"H:t:1", 1, 2), pk.WorkFail(b"H:t:1")]
    assert state.jobs == {} and state.uniques == {}


def test_queued_foreground_job_of_a_vanished_client_is_dropped_at_grab() -> None:
    state, _ = make()
    client, worker = conn(state, 1), conn(state, 2)
    state.handle(client, pk.SubmitJob(b"f", b"", b"x"), 0.0)
    state.disconnect(client, 0.0)
    assert state.jobs[b"H:t:1"].ignore
    state.handle(worker, pk.CanDo(b"f"), 0.0)
    state.handle(worker, pk.GrabJob(), 0.0)
    assert received(worker) == [pk.NoJob()]
    assert state.jobs == {}


def test_admin_text_commands() -> None:
    state, _ = make()
    admin, client = conn(state, 1), conn(state, 2)

    def run(line: str) -> bytes:
        state.admin(admin, line, 0.0)
        out, admin.out[:] = bytes(admin.out), b""
        return out

    state.handle(client, pk.SubmitJobHighBg(b"f", b"", b"x"), 0.0)
    state.handle(client, pk.SubmitJobLowBg(b"f", b"", b"x"), 0.0)
    assert run("STATUS") == b"f\t2\t0\t0\n.\n"
    assert run("prioritystatus") == b"f\t1\t0\t1\t0\n.\n"
    assert run("show jobs") == b"H:t:1\t0\t0\t1\nH:t:2\t0\t0\t1\n.\n"
    assert run("maxqueue f 1") == b"OK\r\n"
    state.handle(client, pk.SubmitJobHighBg(b"f", b"", b"x"), 0.0)
    assert received(client)[-1] == pk.Error(b"QUEUE_ERROR", b"Job queue is full")
    assert run("cancel job H:t:1") == b"OK\r\n"
    assert run("show jobs") == b"H:t:1\t0\t1\t0\nH:t:2\t0\t0\t1\n.\n"  # kept, ignored
    assert run("cancel job H:t:1") == b"OK\r\n"  # as gearmand: still there
    assert run("cancel job H:t:9") == b"ERR UNKNOWN_JOB\r\n"
    assert run("drop function f") == b"ERR there are still queued or running jobs\r\n"
    state.handle(worker := conn(state, 3), pk.CanDo(b"f"), 0.0)
    assert run("drop function f") == (
        b"ERR there are still connected workers or executing clients\r\n")
    state.disconnect(worker, 0.0)
    assert run("create function g") == b"OK\r\n"
    assert run("drop function g") == b"OK\r\n"
    assert run("maxqueue").startswith(b"ERR INVALID_ARGUMENTS")
    assert run("nope") == b"ERR UNKNOWN_COMMAND Unknown+server+commandnope\r\n"
    assert run("workers") == b"1 127.0.0.1 - :\n2 127.0.0.1 - :\n.\n"
    # shutdown is off by default: unknown, word for word as gearmand 1.1.20 answers it
    assert run("shutdown") == b"ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n"
    assert run("shutdown graceful") == b"ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n"
    assert state.shutdown is None
    state.allow_shutdown = True  # --allow-shutdown
    assert run("shutdown graceful") == b"OK\n" and state.shutdown == "graceful"


def test_cancel_fails_the_clients_once_and_frees_the_unique() -> None:
    """Where the bundled server does not copy gearmand (docs/gearman.md): a second cancel does
    not fail the clients again, and a submit of the cancelled job's unique id makes a new job
    (gearmand coalesces it onto the cancelled one, which is then dropped unrun)."""
    state, _ = make()
    admin, a, b, worker = conn(state, 1), conn(state, 2), conn(state, 3), conn(state, 4)
    state.handle(a, pk.SubmitJob(b"f", b"u", b"x"), 0.0)
    state.handle(b, pk.SubmitJob(b"f", b"u", b"x"), 0.0)
    assert received(a) == received(b) == [pk.JobCreated(b"H:t:1")]
    for _ in range(2):
        state.admin(admin, "cancel job H:t:1", 0.0)
    assert bytes(admin.out) == b"OK\r\nOK\r\n"
    assert received(a) == received(b) == [pk.WorkFail(b"H:t:1")]
    state.handle(a, pk.GetStatusUnique(b"u"), 0.0)
    assert received(a) == [pk.StatusResUnique(b"u", True, False, 0, 0, 0)]  # known, as gearmand
    state.handle(b, pk.SubmitJob(b"f", b"u", b"again"), 0.0)
    assert received(b) == [pk.JobCreated(b"H:t:2")]
    state.handle(worker, pk.CanDo(b"f"), 0.0)
    state.handle(worker, pk.GrabJobUniq(), 0.0)
    assert received(worker) == [pk.JobAssignUniq(b"H:t:2", b"f", b"u", b"again")]
    assert list(state.jobs) == [b"H:t:2"]  # the cancelled one was dropped at the grab


def test_workers_lists_client_ids_as_gearmand_does() -> None:
    state, _ = make()
    admin = conn(state, 1)
    ids = [b"my worker", b"", b"a\0hidden", b"L" * 300, b"nl\nx", b"\xff"]
    for fd, client_id in enumerate(ids, start=2):
        c = conn(state, fd)
        state.handle(c, pk.SetClientId(client_id), 0.0)
        state.handle(c, pk.CanDo(b"f%d" % fd), 0.0)
        state.handle(c, pk.CanDo(b"g%d" % fd), 0.0)
    state.admin(admin, "workers", 0.0)
    assert bytes(admin.out).split(b"\n") == [
        b"1 127.0.0.1 - :",
        b"2 127.0.0.1 my worker : g2 f2",  # newest function first
        b"3 127.0.0.1  : g3 f3",
        b"4 127.0.0.1 a : g4 f4",  # up to the NUL
        b"5 127.0.0.1 " + b"L" * 127 + b" : g5 f5",  # at most 127 bytes
        b"6 127.0.0.1 nl?x : g6 f6",  # a newline would break the list
        b"7 127.0.0.1 \xff : g7 f7",  # bytes as sent
        b".", b"",
    ]
