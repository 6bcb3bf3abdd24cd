"""The bundled Gearman server's bounds on what one peer can make it keep: functions
(``--max-functions-per-connection``, ``--max-functions``, and functions nobody serves or queues
forgotten), names and unique ids that would forge admin listings (refused as jobwire's client
refuses them), and stored jobs (``--max-memory``). Over raw sockets against the server as a
subprocess, and on its pure state; counted with ``Admin``, never timed.

gearmand has none of these bounds: it keeps every function it ever saw and lists names and
unique ids verbatim (docs/gearman.md), so these tests run on the bundled server only.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gearman_client import Admin, Client, QueueFull
from gearman_client import _packets as pk
from gearman_client.server import run_server
from gearman_client.server._state import JOB_OVERHEAD, Conn, ServerState

from ..servers.conftest import GEARMAN, answered, recv_packet
from ..servers.sockets import stops_on_sigterm
from ..waiting import wait_until
from .conftest import GearmanServer, start_gearman


def raw_packets(*packets: pk.Packet) -> bytes:
    """Packets as a foreign peer sends them: not validated."""
    return b"".join(pk.encode_packet(p, pk.REQ) for p in packets)


def replies_until_echo(sock: socket.socket) -> list[pk.Packet]:
    """Every packet the server sends on ``sock`` before its ECHO_RES."""
    decoder = pk.PacketDecoder(pk.RES)
    out: list[pk.Packet] = []
    while True:
        while (packet := decoder.next_packet()) is not None:
            if isinstance(packet, pk.EchoRes):
                return out
            out.append(packet)
        chunk = sock.recv(1 << 16)
        assert chunk, "the server closed the connection"
        decoder.feed(chunk)


def functions(server: GearmanServer, prefix: str = "") -> int:
    """Functions the server's ``status`` lists (those starting with ``prefix``)."""
    with Admin(server.url, timeout=30) as admin:
        return sum(1 for row in admin.status() if row.function.startswith(prefix))


@pytest.fixture
def bundled() -> Iterator[GearmanServer]:
    server = start_gearman("bundled")
    yield server
    server.stop()


# -- functions ----------------------------------------------------------------------------------

def test_a_flood_of_can_do_names_from_one_connection_is_bounded_and_freed(
    bundled: GearmanServer,
) -> None:
    """The audit's flood: 200,000 distinct names (4.6 MB) on one worker connection grew the
    server to 583 MB and stayed there after it closed. Now the connection registers 10,000 (the
    default ``--max-functions-per-connection``), each one more gets an ERROR it must read
    (so back-pressure holds it), and its functions go when it does."""
    names = [b"flood-%06d" % i for i in range(200_000)]
    flood = raw_packets(*(pk.CanDo(name) for name in names), pk.EchoReq(b"end"))
    with socket.create_connection(bundled.address, timeout=60) as worker:
        sender = threading.Thread(target=worker.sendall, args=(flood,), daemon=True)
        sender.start()
        replies = replies_until_echo(worker)
        sender.join()
        assert len(replies) == 190_000
        assert set(replies) == {pk.Error(b"MEMORY_ALLOCATION_FAILURE", b"Too many functions on "
                                         b"this connection (--max-functions-per-connection)")}
        assert functions(bundled, "flood-") == 10_000
        assert answered(GEARMAN, bundled)  # other clients are served
        with Client(bundled.url) as client:
            assert client.submit_background("flood-000001", b"x")  # its functions work
    assert wait_until(lambda: functions(bundled, "flood-") == 1)  # the queued job keeps one
    assert stops_on_sigterm(bundled.proc)


def test_max_functions_bounds_every_connection_together() -> None:
    server = start_gearman("bundled", extra=["--max-functions", "50",
                                             "--max-functions-per-connection", "20"])
    try:
        full = pk.Error(b"MEMORY_ALLOCATION_FAILURE", b"Too many functions (--max-functions)")
        with socket.create_connection(server.address, timeout=10) as w1, \
                socket.create_connection(server.address, timeout=10) as w2, \
                socket.create_connection(server.address, timeout=10) as w3:
            replies = []
            for i, sock in enumerate((w1, w2, w3)):  # one after the other: the server serves
                # connections by turns, so three sent at once would interleave their CAN_DOs
                sock.sendall(raw_packets(*(pk.CanDo(b"f%d-%d" % (i, n)) for n in range(20)),
                                         pk.EchoReq(b"end")))
                replies.append(replies_until_echo(sock))
            assert replies[0] == replies[1] == []
            assert replies[2] == [full] * 10  # 40 known: 10 more fit
            assert functions(server) == 50
            w3.sendall(raw_packets(pk.CanDo(b"f0-0"), pk.EchoReq(b"end")))  # a known one
            assert replies_until_echo(w3) == []
            with Client(server.url) as client:
                with pytest.raises(QueueFull, match="--max-functions"):
                    client.submit_background("new", b"x")
                assert client.submit_background("f0-1", b"x")  # a known function still works
            with Admin(server.url) as admin, pytest.raises(Exception, match="MEMORY_ALLOC"):
                admin.create_function("new")
        # the workers' functions go with them, but f0-1, which has a job: room again
        assert wait_until(lambda: functions(server) == 1)
        with Client(server.url) as client:
            assert client.submit_background("new", b"x")
    finally:
        server.stop()


def make() -> tuple[ServerState, Conn, Conn]:
    state = ServerState(handle_prefix="H:t")
    client, worker = Conn(1, "127.0.0.1"), Conn(2, "127.0.0.1")
    state.connect(client)
    state.connect(worker)
    return state, client, worker


def test_a_function_nobody_serves_or_queues_is_forgotten() -> None:
    state, client, worker = make()
    state.handle(worker, pk.CanDo(b"a"), 0.0)
    state.handle(worker, pk.CanDo(b"b"), 0.0)
    state.handle(worker, pk.CanDo(b"c"), 0.0)
    state.handle(worker, pk.CantDo(b"a"), 0.0)
    assert set(state.functions) == {b"b", b"c"}
    state.handle(client, pk.SubmitJobBg(b"b", b"", b"x"), 0.0)
    state.handle(worker, pk.ResetAbilities(), 0.0)
    assert set(state.functions) == {b"b"}  # its job waits
    state.handle(worker, pk.CanDo(b"b"), 0.0)
    state.handle(worker, pk.GrabJob(), 0.0)
    state.handle(worker, pk.CantDo(b"b"), 0.0)
    assert set(state.functions) == {b"b"}  # its job runs
    state.handle(worker, pk.WorkComplete(b"H:t:1", b""), 0.0)
    assert state.functions == {}
    # one a client submits and its worker completes goes when the worker leaves
    state.handle(worker, pk.CanDoTimeout(b"d", 5000), 0.0)
    state.handle(client, pk.SubmitJob(b"d", b"", b"x"), 0.0)
    state.handle(worker, pk.GrabJob(), 0.0)
    state.handle(worker, pk.WorkComplete(b"H:t:2", b""), 0.0)
    assert set(state.functions) == {b"d"}
    state.disconnect(worker, 0.0)
    assert state.functions == {}
    # an admin's ``create function`` and ``maxqueue`` are kept, as in gearmand
    state.admin(client, "create function e", 0.0)
    state.admin(client, "maxqueue f 3", 0.0)
    state.handle(worker := Conn(3, "127.0.0.1"), pk.CanDo(b"e"), 0.0)
    state.connect(worker)
    state.disconnect(worker, 0.0)
    assert set(state.functions) == {b"e", b"f"}
    assert state.memory == 0


# -- names and unique ids that would forge admin listings ----------------------------------------

FORGED_NAME = b"x\t0\t0\t0\nforged"
FORGED_UNIQUE = b"u1\n.\nSTOLEN"


@pytest.mark.parametrize("packet", [
    pk.CanDo(FORGED_NAME),
    pk.CanDoTimeout(FORGED_NAME, 5000),
    pk.CanDo(b"has space"),
    pk.SubmitJob(FORGED_NAME, b"", b"x"),
    pk.SubmitJobBg(FORGED_NAME, b"", b"x"),
    pk.SubmitJobHighBg(b"\x7f", b"", b"x"),
    pk.SubmitJobEpoch(FORGED_NAME, b"", 1, b"x"),
    pk.SubmitReduceJobBackground(b"f", b"", b"bad\nreducer", b"", b"x"),
    pk.SubmitJob(b"", b"", b"x"),
], ids=lambda p: type(p).__name__)
def test_names_a_client_may_not_send_are_refused(bundled: GearmanServer, packet: Any) -> None:
    with socket.create_connection(bundled.address, timeout=10) as sock:
        sock.sendall(raw_packets(packet, pk.EchoReq(b"end")))
        [error] = replies_until_echo(sock)
        assert isinstance(error, pk.Error) and error.code == b"INVALID_FUNCTION_NAME", error
        with Admin(bundled.url) as admin:
            assert [row.function for row in admin.status()] == []
            assert all(w.functions == () for w in admin.workers())
            assert len(admin.priority_status()) == 0


@pytest.mark.parametrize("unique", [FORGED_UNIQUE, b"tab\there", b"\x1b[2J", b"u\r"])
def test_unique_ids_a_client_may_not_send_are_refused(
    bundled: GearmanServer, unique: bytes
) -> None:
    with socket.create_connection(bundled.address, timeout=10) as sock:
        sock.sendall(raw_packets(pk.SubmitJobBg(b"f", unique, b"x"),
                                 pk.SubmitJobBg(b"f", b"ok", b"x"), pk.EchoReq(b"end")))
        error, created = replies_until_echo(sock)
        assert error == pk.Error(b"INVALID_ARGUMENT", b"Unique value contains a control byte")
        assert isinstance(created, pk.JobCreated)
    with Admin(bundled.url) as admin:
        assert admin.show_unique_jobs() == [b"ok"]
        assert admin.version() == "1.1.20-jobwire"  # nothing left over for the next command


def test_the_forgeries_no_longer_reach_the_listings(bundled: GearmanServer) -> None:
    """The audit's two: a forged row in ``status``, and ``show unique jobs`` ended early with
    ``STOLEN`` left as the answer to the admin's next command."""
    with socket.create_connection(bundled.address, timeout=10) as sock:
        sock.sendall(raw_packets(pk.CanDo(FORGED_NAME), pk.SubmitJobBg(b"f", FORGED_UNIQUE, b""),
                                 pk.SubmitJobBg(b"f", b"u2", b"")))
        assert isinstance(recv_packet(sock), pk.Error)
        assert isinstance(recv_packet(sock), pk.Error)
        assert isinstance(recv_packet(sock), pk.JobCreated)
        with Admin(bundled.url) as admin:
            assert [(r.function, r.queued) for r in admin.status()] == [("f", 1)]
            assert admin.show_unique_jobs() == [b"u2"]
            assert admin.version() == "1.1.20-jobwire"


# -- --max-memory -------------------------------------------------------------------------------

def test_max_memory_refuses_jobs_with_queue_error_until_some_go() -> None:
    body = b"b" * 10_000
    size = JOB_OVERHEAD + len(b"f") + len(body)
    server = start_gearman("bundled", extra=["--max-memory", "64k"])
    try:
        with Client(server.url) as client:
            stored = 0
            with pytest.raises(QueueFull, match="--max-memory"):
                for _ in range(100):
                    client.submit_background("f", body)
                    stored += 1
            assert stored == (64 * 1024) // size == 6
            assert client.submit_background("f", b"")  # a smaller one still fits
            with socket.create_connection(server.address, timeout=10) as worker:
                worker.sendall(raw_packets(pk.CanDo(b"f"), pk.GrabJob()))
                job = recv_packet(worker)
                assert isinstance(job, pk.JobAssign)
                with pytest.raises(QueueFull):  # a running job still counts
                    client.submit_background("f", body)
                worker.sendall(raw_packets(pk.WorkComplete(job.handle, b""), pk.EchoReq(b"e")))
                assert replies_until_echo(worker) == []
            assert client.submit_background("f", body)  # its room came back
    finally:
        server.stop()


def test_limit_flags_are_checked() -> None:
    for flags in (["--max-memory", "0"], ["--max-memory", "1.5M"], ["--max-memory", "lots"],
                  ["--max-functions", "0"], ["--max-functions-per-connection", "-1"]):
        proc = subprocess.run(
            [sys.executable, "-m", "gearman_client.server", "-p", "0", *flags],
            capture_output=True, timeout=30,
        )
        assert proc.returncode == 2, flags
        assert b"error" in proc.stderr
    for bad in ({"max_memory": 0}, {"max_functions": 0}, {"max_functions_per_connection": 0}):
        with pytest.raises(ValueError), run_server(**bad):  # type: ignore[arg-type]
            pass
    with run_server(max_memory=None, max_functions=None,
                    max_functions_per_connection=None) as server:  # None: no limit
        assert server.state.max_memory is None
