"""Both servers at the wire level: gearmand 1.1.20's recorded transcript replayed byte for byte
against the bundled server and a fresh gearmand, and every request type the server accepts."""

from __future__ import annotations

import json
import re
import socket
import time
from typing import Any

import pytest

from gearman_client import _packets as pk
from gearman_client._events import NEED_DATA, Answer
from gearman_client._protocol import Connection

from ..conftest import TRANSCRIPTS
from .conftest import GEARMAN_KINDS, GearmanServer, start_gearman

TRANSCRIPT = [
    json.loads(line)
    for line in (TRANSCRIPTS / "gearmand-1.1.20.jsonl").read_text().splitlines()
]


def read_reply(sock: socket.socket, done: Any, timeout: float = 5.0) -> bytes:
    sock.settimeout(0.2)
    data = b""
    deadline = time.monotonic() + timeout
    while not done(data) and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return data + b"<EOF>"
        data += chunk
    return data


def connect(server: GearmanServer) -> socket.socket:
    return socket.create_connection(server.address, timeout=5)


def packets_complete(n: int) -> Any:
    def done(data: bytes) -> bool:
        count = 0
        while len(data) >= 12:
            size = int.from_bytes(data[8:12], "big")
            if len(data) < 12 + size:
                return False
            data = data[12 + size :]
            count += 1
        return count >= n and not data

    return done


def text_complete(expected: bytes) -> Any:
    if expected.endswith(b".\n"):
        return lambda data: data == b".\n" or data.endswith(b"\n.\n")
    return lambda data: data.endswith(b"\n")


@pytest.mark.parametrize("kind", GEARMAN_KINDS)
def test_transcript_replays_byte_for_byte(kind: str) -> None:
    server = start_gearman(kind)
    socks: dict[str, socket.socket] = {}

    def sock_for(role: str) -> socket.socket:  # opened on first use, in the transcript's order
        if role not in socks:
            socks[role] = connect(server)
        return socks[role]

    try:
        for ex in TRANSCRIPT:
            note = ex["note"]
            if ex["kind"] == "text":
                expected = ex["recv"].encode("latin-1")
                admin = sock_for("admin")
                admin.sendall(ex["send"].encode("latin-1"))
                got = read_reply(admin, text_complete(expected))
                if note in ("version", "getpid", "verbose"):
                    assert re.fullmatch(rb"OK \S+\n", got), (note, got)
                elif note.startswith("workers"):
                    strip = re.compile(rb"^\d+ ", re.M)
                    lines = sorted(strip.sub(b"", got).split(b"\n"))  # gearmand's order varies
                    assert lines == sorted(strip.sub(b"", expected).split(b"\n")), note
                elif note == "show unique jobs":  # gearmand's order is its hash table's
                    assert sorted(got.split(b"\n")) == sorted(expected.split(b"\n")), note
                else:
                    assert got == expected, note
                continue
            sent = bytes.fromhex(ex["send_hex"])
            expected = bytes.fromhex(ex["recv_hex"])
            if expected == b"<EOF>" or note.startswith("request sent with RES magic"):
                with connect(server) as fresh:
                    fresh.sendall(sent)
                    got = read_reply(fresh, packets_complete(1))
                assert got == expected, note
                continue
            sock = sock_for("worker" if note.startswith("worker") else "client")
            sock.sendall(sent)
            got = read_reply(sock, packets_complete(packets_complete_count(expected)))
            assert got == expected, note
    finally:
        for sock in socks.values():
            sock.close()
        server.stop()


def packets_complete_count(data: bytes) -> int:
    count = 0
    while len(data) >= 12:
        data = data[12 + int.from_bytes(data[8:12], "big") :]
        count += 1
    return count


def roundtrip(
    sock: socket.socket, conn: Connection, *packets: pk.Packet, answers: int
) -> list[Any]:
    sock.sendall(b"".join(conn.send(p) for p in packets))
    events: list[Any] = []
    deadline = time.monotonic() + 5
    while sum(isinstance(e, Answer) for e in events) < answers:
        assert time.monotonic() < deadline, events
        conn.receive_data(sock.recv(65536))
        while (event := conn.next_event()) is not NEED_DATA:
            events.append(event)
    return events


def test_every_request_type_the_server_accepts(
    gearman_server: GearmanServer, function: str
) -> None:
    fn = function.encode()
    red = fn + b"-r"
    with connect(gearman_server) as c, connect(gearman_server) as w:
        client, worker = Connection(), Connection()
        ev = roundtrip(c, client, pk.OptionReq(b"exceptions"), pk.EchoReq(b"e"), answers=2)
        assert [e.reply for e in ev] == [pk.OptionRes(b"exceptions"), pk.EchoRes(b"e")]
        created = roundtrip(
            c, client,
            pk.SubmitJob(fn, b"", b"1"), pk.SubmitJobBg(fn, b"", b"2"),
            pk.SubmitJobHigh(fn, b"", b"3"), pk.SubmitJobHighBg(fn, b"", b"4"),
            pk.SubmitJobLow(fn, b"", b"5"), pk.SubmitJobLowBg(fn, b"", b"6"),
            pk.SubmitJobEpoch(fn, b"", 1, b"7"),
            pk.SubmitReduceJob(fn, b"", red, b"", b"8"),
            pk.SubmitReduceJobBackground(fn, b"", red, b"", b"9"),
            answers=9,
        )
        assert all(isinstance(e.reply, pk.JobCreated) for e in created)
        handles = [e.reply.handle for e in created]
        assert len(set(handles)) == 9
        refused = roundtrip(c, client, pk.SubmitJobSched(fn, b"", 0, 0, 1, 1, 0, b"x"),
                            pk.AllYours(), pk.Unused(), answers=3)
        assert [e.reply.code for e in refused] == [b"INVALID_COMMAND"] * 3
        status = roundtrip(c, client, pk.GetStatus(handles[1]), pk.GetStatusUnique(b"none"),
                           answers=2)
        assert status[0].reply == pk.StatusRes(handles[1], True, False, 0, 0)
        assert status[1].reply == pk.StatusResUnique(b"none", False, False, 0, 0, 0)

        # worker side: abilities, client id, every grab, every work packet
        worker_setup = [pk.SetClientId(b"every"), pk.CanDo(b"other"), pk.CantDo(b"other"),
                        pk.ResetAbilities(), pk.CanDoTimeout(fn, 60_000)]
        got = roundtrip(w, worker, *worker_setup, pk.GrabJob(), answers=1)
        order = [got[-1].reply]
        got = roundtrip(w, worker, pk.GrabJobUniq(), pk.GrabJobAll(), answers=2)
        order += [e.reply for e in got if isinstance(e, Answer)]
        assert isinstance(order[0], pk.JobAssign) and order[0].data in (b"3", b"4")
        assert isinstance(order[1], pk.JobAssignUniq)
        assert {order[0].data, order[1].data} == {b"3", b"4"}  # both HIGH first
        assert isinstance(order[2], pk.JobAssignUniq) and order[2].data == b"1"
        first = order[0].handle
        updates = [pk.WorkData(first, b"d"), pk.WorkWarning(first, b"w"),
                   pk.WorkStatus(first, 1, 3)]
        w.sendall(b"".join(worker.send(p) for p in updates))
        w.sendall(worker.send(pk.EchoReq(b"sync")))
        assert roundtrip(w, worker, answers=1)[-1].reply == pk.EchoRes(b"sync")
        status = roundtrip(c, client, pk.GetStatus(first), answers=1)[-1].reply
        assert status.known and status.running and (status.numerator, status.denominator) == (1, 3)
        w.sendall(b"".join(worker.send(p) for p in (
            pk.WorkComplete(order[0].handle, b"done"), pk.WorkFail(order[1].handle),
            pk.WorkException(order[2].handle, b"oops"),
        )))
        events: list[Any] = []
        deadline = time.monotonic() + 5
        while not any(isinstance(e, pk.WorkException) for e in events):
            assert time.monotonic() < deadline, events
            client.receive_data(c.recv(65536))
            while (e := client.next_event()) is not NEED_DATA:
                events.append(e)
        assert pk.WorkException(handles[0], b"oops") in events
        foreground_high = handles[2]
        if foreground_high in (order[0].handle, order[1].handle):
            assert any(getattr(e, "handle", None) == foreground_high for e in events)
        # a late WORK_COMPLETE for a finished job: ERROR JOB_NOT_FOUND, unsolicited
        w.sendall(worker.send(pk.WorkComplete(order[0].handle, b"again")))
        got = roundtrip(w, worker, pk.EchoReq(b"sync"), answers=1)
        assert got[0] == pk.Error(b"JOB_NOT_FOUND", b"Job given in work result not found")
        # PRE_SLEEP with jobs waiting: NOOP at once
        w.sendall(worker.send(pk.PreSleep()))
        got = roundtrip(w, worker, pk.EchoReq(b"sync"), answers=1)
        assert got[0] == pk.Noop()


def test_bundled_server_refuses_oversized_bodies_and_stays_up() -> None:
    server = start_gearman("bundled")
    try:
        with connect(server) as sock:
            sock.sendall(pk.REQ + (16).to_bytes(4, "big") + (65 * 1024 * 1024).to_bytes(4, "big"))
            assert read_reply(sock, lambda d: False, timeout=2) == b"<EOF>"
        with connect(server) as sock:
            sock.sendall(pk.encode_packet(pk.EchoReq(b"x" * 1_000_000), pk.REQ))
            got = read_reply(sock, packets_complete(1))
            assert got == pk.encode_packet(pk.EchoRes(b"x" * 1_000_000), pk.RES)
    finally:
        server.stop()
