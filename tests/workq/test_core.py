"""The Sans-IO core against the Workq 0.2.0 transcript, split at every boundary, and its rules."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobwire.errors import ConnectionLost, LocalProtocolError, RemoteProtocolError
from tests.conftest import TRANSCRIPTS
from workq_client._commands import (
    MAX_PAYLOAD,
    Add,
    Command,
    Complete,
    Delete,
    EncodedAdd,
    Fail,
    InspectJob,
    InspectJobs,
    InspectQueue,
    InspectQueues,
    InspectScheduledJobs,
    InspectServer,
    InvalidArgument,
    Lease,
    Result,
    Run,
    Schedule,
    format_time,
    new_id,
    new_ids,
    to_ms,
    validate_id,
)
from workq_client._events import (
    NEED_DATA,
    OK,
    ConnectionClosed,
    ErrorKind,
    ErrorReply,
    Event,
    InspectReply,
    JobResult,
    Leased,
    Record,
)
from workq_client._protocol import Connection, ConnectionState
from workq_client._records import JobState, job_info, queue_info, server_info
from workq_client._server_protocol import BadRequest, ServerConnection
from workq_client._session import WorkqSession
from workq_client.errors import DuplicateJob

TRANSCRIPT = TRANSCRIPTS / "workq-0.2.0.jsonl"
EXCHANGES = [json.loads(line) for line in TRANSCRIPT.read_text().splitlines() if line.strip()]
ID4 = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"
ID5 = "6ba7b810-9dad-41d1-80b4-00c04fd430c5"
ID6 = "6ba7b810-9dad-41d1-80b4-00c04fd430c6"


def by_note(prefix: str) -> dict[str, str]:
    return next(ex for ex in EXCHANGES if ex["note"].startswith(prefix))


def job_record(job_id: str, payload: bytes, ttr: int, prio: int, attempts: int, created: str,
               time: str | None = None, name: str = "ping") -> Record:
    fields = [("name", name.encode()), ("ttr", b"%d" % ttr), ("ttl", b"60000"),
              ("payload-size", b"%d" % len(payload)), ("payload", payload),
              ("max-attempts", b"%d" % attempts), ("attempts", b"0"), ("max-fails", b"0"),
              ("fails", b"0"), ("priority", b"%d" % prio), ("state", b"0"),
              ("created", created.encode())]
    if time is not None:
        fields.append(("time", time.encode()))
    return Record(job_id, tuple(fields), len(fields))


def queue(ready: int) -> Record:
    return Record("ping", (("ready-len", b"%d" % ready), ("scheduled-len", b"0")), 2)


SERVER = Record("server", (("active-clients", b"1"), ("evicted-jobs", b"0"),
                           ("started", b"2026-11-21T23:30:35Z")), 2)
CLIENT_ERROR = ErrorKind.CLIENT_ERROR

# What each exchange's commands are, and the replies the client role must see.
VECTORS: list[tuple[str, list[Command], list[Event]]] = [
    ("add with flags", [Add("ping", b"pong", 1000, 60000, 10, 3, job_id=ID4)], [OK]),
    ("add duplicate id", [Add("ping", b"pong", 1000, 60000, job_id=ID4)],
     [ErrorReply(CLIENT_ERROR, "Duplicate job")]),
    ("add payload with CRLF", [Add("ping", b"a\r\nb\r\n", 5000, 60000, job_id=ID5)], [OK]),
    ("inspect job", [InspectJob(ID5)],
     [InspectReply((job_record(ID5, b"a\r\nb\r\n", 5000, 0, 0, "2026-11-21T23:30:37Z"),))]),
    ("inspect queue /", [InspectQueue("ping"), InspectQueues(0, 10), InspectServer()],
     [InspectReply((queue(2),)), InspectReply((queue(2),)), InspectReply((SERVER,))]),
    ("inspect jobs", [InspectJobs("ping", 0, 10)],
     [InspectReply((job_record(ID4, b"pong", 1000, 10, 3, "2026-11-21T23:30:36Z"),
                    job_record(ID5, b"a\r\nb\r\n", 5000, 0, 0, "2026-11-21T23:30:37Z")))]),
    ("lease highest", [Lease(("ping",), 1000)], [Leased(ID4, "ping", 1000, b"pong")]),
    ("complete", [Complete(ID4, b"done")], [OK]),
    ("result of completed", [Result(ID4, 1000)], [JobResult(ID4, True, b"done")]),
    ("lease + fail", [Lease(("ping",), 1000)], [Leased(ID5, "ping", 5000, b"a\r\nb\r\n")]),
    ("fail", [Fail(ID5, b"err")], [OK]),
    ("result of failed", [Result(ID5, 0)], [JobResult(ID5, False, b"err")]),
    ("lease on empty", [Lease(("ping",), 200)], [ErrorReply(ErrorKind.TIMEOUT)]),
    ("result unknown", [Result(ID6, 0)], [ErrorReply(ErrorKind.NOT_FOUND)]),
    ("schedule", [Schedule("later", b"x", 1000, 60000,
                           datetime(2099, 1, 1, tzinfo=timezone.utc), job_id=ID6)], [OK]),
    ("inspect scheduled-jobs", [InspectScheduledJobs("later", 0, 10)],
     [InspectReply((job_record(ID6, b"x", 1000, 0, 0, "2026-11-21T23:30:43Z",
                               "2099-01-01T00:00:00Z", "later"),))]),
    ("delete", [Delete(ID6)], [OK]),
]


def feed(conn: Connection | ServerConnection, data: bytes) -> None:
    if data:  # b"" would mean EOF
        conn.receive_data(data)


def drain(conn: Connection | ServerConnection) -> list[object]:
    events: list[object] = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return events
        events.append(event)
        if isinstance(event, ConnectionClosed):
            return events


def test_every_transcript_exchange_is_covered() -> None:
    covered = {by_note(note)["note"] for note, _, _ in VECTORS}
    rejected = {"bad priority", "non-v4 id", "wrong arg count: payload then read as a command "
                "(desync)", "unknown command", "upper-case command",
                "bare LF line ending -> connection closed"}
    assert covered | rejected == {ex["note"] for ex in EXCHANGES}


@pytest.mark.parametrize(("note", "commands", "replies"), VECTORS, ids=[v[0] for v in VECTORS])
def test_client_encodes_the_transcript_bytes(
    note: str, commands: list[Command], replies: list[Event]
) -> None:
    conn = Connection()
    assert b"".join(conn.send(c) for c in commands) == by_note(note)["send"].encode("latin-1")


@pytest.mark.parametrize(("note", "commands", "replies"), VECTORS, ids=[v[0] for v in VECTORS])
def test_client_reads_the_transcript_split_at_every_boundary(
    note: str, commands: list[Command], replies: list[Event]
) -> None:
    recv = by_note(note)["recv"].encode("latin-1")
    for cut in range(len(recv) + 1):
        conn = Connection()
        for command in commands:
            conn.send(command)
        feed(conn, recv[:cut])
        events = drain(conn)
        feed(conn, recv[cut:])
        events += drain(conn)
        got = [e for e in events if not isinstance(e, ConnectionClosed)]
        assert got == replies, f"split at {cut}"
        assert conn.pending == 0


@given(st.data())
def test_client_reads_the_whole_transcript_pipelined_in_random_chunks(data: st.DataObject) -> None:
    # Every successful exchange pipelined on one connection, fed in random pieces.
    vectors = [v for v in VECTORS if not any(isinstance(r, ErrorReply) and r.kind is CLIENT_ERROR
                                             for r in v[2])]
    recv = b"".join(by_note(note)["recv"].encode("latin-1") for note, _, _ in vectors)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(recv)), max_size=12)))
    conn = Connection()
    for _, commands, _ in vectors:
        for command in commands:
            conn.send(command)
    events: list[object] = []
    start = 0
    for cut in [*cuts, len(recv)]:
        feed(conn, recv[start:cut])
        start = cut
        events += drain(conn)
    assert events == [r for _, _, replies in vectors for r in replies]


@pytest.mark.parametrize(("note", "commands", "replies"), VECTORS, ids=[v[0] for v in VECTORS])
def test_server_role_reads_the_transcript_and_encodes_its_replies(
    note: str, commands: list[Command], replies: list[Event]
) -> None:
    ex = by_note(note)
    send = ex["send"].encode("latin-1")
    for cut in range(len(send) + 1):
        server = ServerConnection()
        feed(server, send[:cut])
        got = drain(server)
        feed(server, send[cut:])
        got += drain(server)
        assert got == commands, f"split at {cut}"
    # The reply objects encode to the transcript's bytes (what the bundled server writes).
    assert b"".join(r.encode() for r in replies) == ex["recv"].encode("latin-1")  # type: ignore[attr-defined]


@given(st.data())
def test_server_role_reads_the_whole_transcript_pipelined_in_random_chunks(
    data: st.DataObject,
) -> None:
    send = b"".join(by_note(note)["send"].encode("latin-1") for note, _, _ in VECTORS)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(send)), max_size=12)))
    server = ServerConnection()
    events: list[object] = []
    start = 0
    for cut in [*cuts, len(send)]:
        feed(server, send[start:cut])
        start = cut
        events += drain(server)
    assert events == [c for _, commands, _ in VECTORS for c in commands]


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        ("bad priority", [BadRequest("Invalid Priority")]),
        ("non-v4 id", [BadRequest("Invalid ID")]),
        ("unknown command", [BadRequest("Unknown command")]),
        ("upper-case command", [BadRequest("Unknown command")]),
        # The one deliberate difference: the payload is dropped, so no second error.
        ("wrong arg count", [BadRequest("Invalid command args")]),
    ],
)
def test_server_role_rejections_match_the_transcript(note: str, expected: list[object]) -> None:
    ex = by_note(note)
    server = ServerConnection()
    server.receive_data(ex["send"].encode("latin-1"))
    got = drain(server)
    assert got == expected
    assert got[0].reply.encode() == ex["recv"].encode("latin-1").split(b"\r\n")[0] + b"\r\n"  # type: ignore[attr-defined]


def test_server_role_closes_on_bare_lf() -> None:
    server = ServerConnection()
    server.receive_data(by_note("bare LF")["send"].encode("latin-1"))
    event = server.next_event()
    assert isinstance(event, ConnectionClosed) and "bare LF" in event.reason
    server.receive_data(b"inspect server\r\n")
    assert isinstance(server.next_event(), ConnectionClosed)


def test_client_flags_out_of_step_after_client_error_to_payload_command() -> None:
    conn = Connection()
    conn.send(Add("ping", b"x", 1000, 1000))
    conn.send(InspectServer())
    conn.receive_data(b"-CLIENT-ERROR Invalid command args\r\n-CLIENT-ERROR Unknown command\r\n")
    assert conn.next_event() == ErrorReply(CLIENT_ERROR, "Invalid command args")
    closed = conn.next_event()
    assert isinstance(closed, ConnectionClosed) and closed.pending == 1
    assert "out of step" in closed.reason
    with pytest.raises(LocalProtocolError):
        conn.send(InspectServer())


def test_client_error_to_a_command_without_payload_keeps_the_connection() -> None:
    conn = Connection()
    conn.send(InspectQueue("nope"))
    conn.send(Delete(ID4))
    conn.receive_data(b"-CLIENT-ERROR Invalid name\r\n-NOT-FOUND\r\n+OK\r\n")
    assert conn.next_event() == ErrorReply(CLIENT_ERROR, "Invalid name")
    assert conn.next_event() == ErrorReply(ErrorKind.NOT_FOUND)
    assert conn.state is ConnectionState.OPEN
    with pytest.raises(RemoteProtocolError, match="no command"):
        conn.next_event()


def test_server_error_reply() -> None:
    conn = Connection()
    conn.send(Delete(ID4))
    conn.receive_data(b"-SERVER-ERROR disk on fire\r\n")
    assert conn.next_event() == ErrorReply(ErrorKind.SERVER_ERROR, "disk on fire")


@pytest.mark.parametrize(
    ("command", "data", "match"),
    [
        (Delete(ID4), b"OK\r\n", "cannot answer"),
        (Delete(ID4), b"+OK 1\r\n", "cannot answer"),
        (Lease(("a",), 0), b"+OK\r\n", "bare"),
        (Lease(("a",), 0), b"+OK 2\r\n", "1 record"),
        (Delete(ID4), b"-WHAT\r\n", "unknown error"),
        (Delete(ID4), b"+OK\n", None),
        (Lease(("a",), 0), b"+OK 1\r\n%b a 10 4\r\npongXX" % ID4.encode(), "CRLF"),
        (Lease(("a",), 0), b"+OK 1\r\n%b a 10 1048577\r\n" % ID4.encode(), "over"),
        (Lease(("a",), 0), b"+OK 1\r\n%b a x 4\r\n" % ID4.encode(), "ttr"),
        (Result(ID4), b"+OK 1\r\n%b 2 4\r\n" % ID4.encode(), "success"),
        (Result(ID4), b"+OK 1\r\n%b 1\r\n" % ID4.encode(), "bad result"),
        (InspectJob(ID4), b"+OK 1\r\n%b 1\r\npayload x\r\n" % ID4.encode(), "payload-size"),
        (InspectJob(ID4), b"+OK 1\r\n%b 2\r\npayload-size 1\r\npayload xy\r\n" % ID4.encode(),
         "CRLF"),
        (InspectJob(ID4), b"+OK 1\r\n%b two\r\n" % ID4.encode(), "key count"),
        (InspectJob(ID4), b"+OK 1\r\n%b 1\r\nnovalue\r\n" % ID4.encode(), "key line"),
        (InspectQueues(), b"+OK -1\r\n", "reply count"),
    ],
)
def test_client_rejects_garbage_and_stays_poisoned(
    command: Command, data: bytes, match: str | None
) -> None:
    conn = Connection()
    conn.send(command)
    conn.receive_data(data)
    if match is None:  # a bare LF never ends a line: it waits for CRLF, then chokes or closes
        assert conn.next_event() is NEED_DATA
        conn.receive_data(b"")
        closed = conn.next_event()
        assert isinstance(closed, ConnectionClosed) and closed.partial and closed.pending == 1
        return
    with pytest.raises(RemoteProtocolError, match=match):
        conn.next_event()
    assert conn.state is ConnectionState.ERROR
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    with pytest.raises(LocalProtocolError):
        conn.send(InspectServer())


def test_client_refuses_an_endless_line() -> None:
    conn = Connection()
    conn.send(InspectServer())
    conn.receive_data(b"+" + b"x" * 70000)
    with pytest.raises(RemoteProtocolError, match="longer"):
        conn.next_event()


def test_eof_mid_reply_and_between_replies() -> None:
    conn = Connection()
    conn.send(Lease(("a",), 10))
    conn.receive_data(b"+OK 1\r\n%b a 10 4\r\npo" % ID4.encode())
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    closed = conn.next_event()
    assert closed == ConnectionClosed(pending=1, partial=True, reason="closed by peer")
    idle = Connection()
    idle.receive_data(b"")
    assert idle.next_event() == ConnectionClosed(pending=0, partial=False)


def test_data_after_eof_raises_and_is_not_fed() -> None:
    conn = Connection()
    conn.send(Lease(("a",), 10))
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after EOF"):
        conn.receive_data(b"+OK 0\r\n")
    assert conn.next_event() == ConnectionClosed(pending=1, partial=False)


def test_inspect_server_with_an_honest_key_count_and_with_extra_keys() -> None:
    honest = b"+OK 1\r\nserver 3\r\nactive-clients 4\r\nevicted-jobs 1\r\nstarted x\r\n"
    conn = Connection()
    conn.send(InspectServer())
    conn.send(Delete(ID4))
    conn.receive_data(honest + b"+OK\r\n")
    reply = conn.next_event()
    assert isinstance(reply, InspectReply) and len(reply.records[0].fields) == 3
    assert conn.next_event() == OK
    # A future server with a fourth, unannounced key after "started": the next reply bounds it.
    conn = Connection()
    conn.send(InspectServer())
    conn.send(Delete(ID4))
    conn.receive_data(b"+OK 1\r\nserver 1\r\nactive-clients 4\r\nevicted-jobs 1\r\n")
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"+OK\r\n")
    reply = conn.next_event()
    assert isinstance(reply, InspectReply) and [k for k, _ in reply.records[0].fields] == [
        "active-clients", "evicted-jobs"]
    assert conn.next_event() == OK


def test_inspect_payload_block_that_looks_like_records() -> None:
    payload = b"+OK 1\r\nname evil\r\npayload-size 99\r\n"
    record = job_record(ID4, payload, 1000, 0, 0, "2026-11-21T23:30:37Z")
    conn = Connection()
    conn.send(InspectJob(ID4))
    conn.receive_data(InspectReply((record,)).encode())
    reply = conn.next_event()
    assert isinstance(reply, InspectReply)
    info = job_info(reply.records[0])
    assert info.payload == payload and info.state is JobState.NEW and info.ttr == 1.0


def test_typed_records() -> None:
    assert queue_info(queue(3)).ready_len == 3
    info = server_info(SERVER)
    assert info.active_clients == 1
    assert info.started == datetime(2026, 11, 21, 23, 30, 35, tzinfo=timezone.utc)
    sched = job_info(job_record(ID6, b"x", 1000, -5, 0, "2026-11-21T23:30:43Z",
                                "2099-01-01T00:00:00Z"))
    assert sched.time == datetime(2099, 1, 1, tzinfo=timezone.utc) and sched.priority == -5
    with pytest.raises(RemoteProtocolError, match="lacks"):
        queue_info(Record("q", (("ready-len", b"1"),)))
    with pytest.raises(RemoteProtocolError, match="integer"):
        queue_info(Record("q", (("ready-len", b"x"), ("scheduled-len", b"0"))))


# -- validation on the send path ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["", "a b", "a\r\nadd", "a\x00", "x" * 256, "ü", "a/b", "a=b", 5, None]
)
def test_invalid_names_are_refused_before_sending(name: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        Add(name, b"", 1000, 1000)  # type: ignore[arg-type]
    assert info.value.server_text == "Invalid name"
    with pytest.raises(LocalProtocolError):
        Lease(("ok", name), 0)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        InspectQueue(name)  # type: ignore[arg-type]


def test_valid_edge_names() -> None:
    assert Add("x" * 255, b"", 1, 1).name == "x" * 255
    assert Lease(["a.b", "C_d-9"], 0).names == ("a.b", "C_d-9")  # type: ignore[arg-type]
    assert Lease("single", 5).encode() == b"lease single 5\r\n"  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        Lease((), 0)


@pytest.mark.parametrize(
    "job_id",
    ["6ba7b810-9dad-11d1-80b4-00c04fd430c4", "nope", "", "6ba7b810-9dad-41d1-80b4-00c04fd430c4\r\n",
     123, uuid.uuid1()],
)
def test_invalid_ids(job_id: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        Delete(job_id)  # type: ignore[arg-type]
    assert info.value.server_text == "Invalid ID"


def test_ids_are_canonicalised_and_generated() -> None:
    assert validate_id("6BA7B8109DAD41D180B400C04FD430C4") == ID4
    assert validate_id(uuid.UUID(ID4)) == ID4
    generated = {Add("a", b"", 1, 1).job_id for _ in range(50)}
    assert len(generated) == 50
    assert all(uuid.UUID(i).version == 4 for i in generated)


@pytest.mark.parametrize(
    ("build", "text"),
    [
        (lambda: Add("a", b"x" * (MAX_PAYLOAD + 1), 1, 1), "Invalid payload size"),
        (lambda: Add("a", "str", 1, 1), "Invalid payload size"),
        (lambda: Add("a", b"", 0, 1), "Invalid TTR"),
        (lambda: Add("a", b"", 86_400_001, 1), "Invalid TTR"),
        (lambda: Add("a", b"", 1, 0), "Invalid TTL"),
        (lambda: Add("a", b"", 1, 2_592_000_001), "Invalid TTL"),
        (lambda: Add("a", b"", 1, 1, priority=2**31), "Invalid Priority"),
        (lambda: Add("a", b"", 1, 1, priority=-(2**31) - 1), "Invalid Priority"),
        (lambda: Add("a", b"", 1, 1, max_attempts=256), "Invalid max attempts"),
        (lambda: Add("a", b"", 1, 1, max_fails=-1), "Invalid max fails"),
        (lambda: Add("a", b"", 1, 1, priority=True), "Invalid Priority"),
        (lambda: Run("a", b"", 1, 86_400_001), "Invalid wait timeout"),
        (lambda: Result(ID4, -1), "Invalid wait timeout"),
        (lambda: Complete(ID4, b"x" * (MAX_PAYLOAD + 1)), "Invalid result size"),
        (lambda: Fail(ID4, "text"), "Invalid result size"),
        (lambda: InspectJobs("a", 0, 0), "Invalid limit"),
        (lambda: InspectQueues(0, 101), "Invalid limit"),
        (lambda: InspectScheduledJobs("a", -1, 1), "Invalid cursor offset"),
    ],
)
def test_out_of_range_values(build: object, text: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        build()  # type: ignore[operator]
    assert info.value.server_text == text


def test_in_range_edges_encode() -> None:
    big = Add("a", b"x" * MAX_PAYLOAD, 86_400_000, 2_592_000_000, -(2**31), 255, 255, job_id=ID4)
    assert big.encode().startswith(
        b"add %b a 86400000 2592000000 1048576 -priority=-2147483648 -max-attempts=255 "
        b"-max-fails=255\r\n" % ID4.encode())
    assert Run("a", b"p", 5, 0, 7, job_id=ID4).encode() == (
        b"run %b a 5 0 1 -priority=7\r\np\r\n" % ID4.encode())


def test_durations_and_times() -> None:
    assert to_ms("ttr", 1) == 1000
    assert to_ms("ttr", 0.3) == 300
    assert to_ms("ttr", 0.0001) == 1
    assert to_ms("ttr", timedelta(minutes=1)) == 60000
    for bad in (-1, float("nan"), float("inf"), "1", None, True):
        with pytest.raises(LocalProtocolError):
            to_ms("ttr", bad)  # type: ignore[arg-type]
    plus2 = timezone(timedelta(hours=2))
    assert format_time(datetime(2030, 1, 1, 2, 0, 0, tzinfo=plus2)) == "2030-01-01T00:00:00Z"
    assert format_time(datetime(2030, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc)) == (
        "2030-01-01T00:00:01Z")
    with pytest.raises(LocalProtocolError, match="aware"):
        format_time(datetime(2030, 1, 1))
    with pytest.raises(LocalProtocolError):
        Schedule("a", b"", 1, 1, datetime(2030, 1, 1))


# -- server role ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"lease a b c 100\r\n", [Lease(("a", "b", "c"), 100)]),
        (b"lease  a   100\r\n", [Lease(("a",), 100)]),
        (b"lease 100\r\n", [BadRequest("Invalid command args")]),
        (b"lease a b!c 100\r\n", [BadRequest("Invalid name")]),
        (b"lease a 86400001\r\n", [BadRequest("Invalid wait timeout")]),
        (b"lease a -1\r\n", [BadRequest("Invalid wait timeout")]),
        (b"result %b\r\n" % ID4.encode(), [BadRequest("Invalid command args")]),
        (b"delete nope\r\n", [BadRequest("Invalid ID")]),
        (b"delete %b -x=\r\n" % ID4.encode(), [BadRequest("Invalid command flags")]),
        (b"delete %b -x=1 -x=2\r\n" % ID4.encode(), [BadRequest("Invalid command flags")]),
        (b"inspect\r\n", [BadRequest("Invalid command args")]),
        (b"inspect frob\r\n", [BadRequest("Unknown command")]),
        (b"inspect server extra\r\n", [BadRequest("Invalid command args")]),
        (b"inspect jobs a 0 101\r\n", [BadRequest("Invalid limit")]),
        (b"inspect queues x 1\r\n", [BadRequest("Invalid cursor offset")]),
        (b"\r\n", [BadRequest("Unknown command")]),
        (b"\xff\xfe\r\n", [BadRequest("Unknown command")]),
        (b"add %b a 1 1 1 -priority=1 -max-attempts=1 -max-fails=1 -x=1\r\nx\r\ninspect server"
         b"\r\n" % ID4.encode(), [BadRequest("Invalid command flags"), InspectServer()]),
        (b"add %b a 1 1 2\r\nxyzw\r\ninspect server\r\n" % ID4.encode(),
         [BadRequest("Invalid payload size"), BadRequest("Unknown command"), InspectServer()]),
        (b"add %b a 1 1 2\r\nxyz\r\ninspect server\r\n" % ID4.encode(),
         [BadRequest("Invalid payload size"),
          ConnectionClosed(partial=True, reason="bare LF line ending")]),
        (b"fail %b 2\r\nxyzw\r\n" % ID4.encode(),
         [BadRequest("Invalid result size"), BadRequest("Unknown command")]),
        (b"add %b a 1 1 1048577\r\n" % ID4.encode() + b"x" * 1048577 + b"\r\ninspect server\r\n",
         [BadRequest("Invalid payload size"), InspectServer()]),
        (b"add %b a 1 1 x\r\ninspect server\r\n" % ID4.encode(),
         [BadRequest("Invalid payload size"), InspectServer()]),
        (b"complete %b 3 extra\r\nabc\r\ninspect server\r\n" % ID4.encode(),
         [BadRequest("Invalid command args"), InspectServer()]),
        (b"add %b a 0 1 0\r\n\r\n" % ID4.encode(), [BadRequest("Invalid TTR")]),
        (b"add %b a 1 0 0\r\n\r\n" % ID4.encode(), [BadRequest("Invalid TTL")]),
        (b"add %b a 1 1 0 -max-attempts=256\r\n\r\n" % ID4.encode(),
         [BadRequest("Invalid max attempts")]),
        (b"add %b a 1 1 0 -max-fails=x\r\n\r\n" % ID4.encode(), [BadRequest("Invalid max fails")]),
        (b"add %b a 1 1 0 -unknown=5\r\n\r\n" % ID4.encode(), [Add("a", b"", 1, 1, job_id=ID4)]),
        (b"schedule %b a 1 1 2099-01-01 0\r\n\r\n" % ID4.encode(), [BadRequest("Invalid time")]),
        (b"run %b a 1 1 0 -priority=1 -max-attempts=1\r\n\r\n" % ID4.encode(),
         [BadRequest("Invalid command flags")]),
        (b"run %b a 1 5 0 -priority=-3\r\n\r\n" % ID4.encode(),
         [Run("a", b"", 1, 5, -3, job_id=ID4)]),
        (b"add 6BA7B8109DAD41D180B400C04FD430C4 a 1 1 0\r\n\r\n",
         [Add("a", b"", 1, 1, job_id=ID4)]),
    ],
)
def test_server_role_parsing(data: bytes, expected: list[object]) -> None:
    server = ServerConnection()
    server.receive_data(data)
    assert drain(server) == expected


def test_server_role_long_line_closes_and_eof_reports_partial() -> None:
    server = ServerConnection()
    server.receive_data(b"x" * 70000)
    closed = server.next_event()
    assert isinstance(closed, ConnectionClosed) and "too long" in closed.reason
    server = ServerConnection()
    server.receive_data(b"inspect ser")
    assert server.next_event() is NEED_DATA
    server.receive_data(b"")
    assert server.next_event() == ConnectionClosed(partial=True)


@given(st.binary(max_size=300))
def test_server_role_never_raises_on_garbage(data: bytes) -> None:
    server = ServerConnection()
    server.receive_data(data)
    server.receive_data(b"")
    for _ in range(400):
        event = server.next_event()
        if isinstance(event, ConnectionClosed):
            break
    else:
        pytest.fail("no ConnectionClosed after EOF")


@given(st.binary(max_size=300))
def test_client_role_garbage_is_a_remote_protocol_error_or_waits(data: bytes) -> None:
    conn = Connection()
    conn.send(InspectJobs("ping", 0, 10))
    conn.send(Lease(("a",), 0))
    conn.receive_data(data)
    try:
        drain(conn)
    except RemoteProtocolError:
        return


# -- the clients' hot path: what it builds is what the typed commands build ------------------


def _old_to_ms(seconds: float) -> int:
    return math.ceil(round(seconds * 1000, 6))  # the rule: rounded up after float noise


@given(st.one_of(st.integers(0, 10**12), st.floats(0, 1e12, allow_nan=False)))
def test_to_ms_rounds_every_number_up_as_the_rule_says(seconds: float) -> None:
    assert to_ms("ttr", seconds) == _old_to_ms(seconds)
    assert to_ms("ttr", timedelta(seconds=seconds)) == _old_to_ms(
        timedelta(seconds=seconds).total_seconds()) if seconds < 1e9 else True


def test_to_ms_out_of_float_range_is_a_typed_error() -> None:
    # An int too large for a float, or a float whose milliseconds overflow to infinity, used
    # to raise a bare OverflowError.
    assert to_ms("ttr", 10**400) == 10**403
    with pytest.raises(InvalidArgument, match="ttr"):
        Add("a", b"", to_ms("ttr", 10**400), 1)
    with pytest.raises(LocalProtocolError, match="out of range"):
        to_ms("ttl", 1e306)


@given(
    name=st.text("abcXYZ019_.-", min_size=1, max_size=255),
    payload=st.binary(max_size=300),
    ttr=st.integers(1, 86_400_000),
    ttl=st.integers(1, 2_592_000_000),
    priority=st.integers(-(2**31), 2**31 - 1),
    attempts=st.integers(0, 255),
    fails=st.integers(0, 255),
    job_id=st.uuids(version=4).map(str),
)
def test_encoded_add_is_add_on_the_wire(
    name: str, payload: bytes, ttr: int, ttl: int, priority: int, attempts: int, fails: int,
    job_id: str,
) -> None:
    add = Add(name, payload, ttr, ttl, priority, attempts, fails, job_id=job_id)
    encoded = EncodedAdd(name, payload, ttr, ttl, priority, attempts, fails, job_id=job_id)
    assert (encoded.job_id, encoded.encode(), encoded.wire_size()) == (
        job_id, add.encode(), len(add.encode()))
    many = EncodedAdd.many(name, [payload, b"", payload], ttr, ttl, priority,
                           [job_id, "", job_id.upper()])
    assert [c.encode() for c in many] == [
        Add(name, p, ttr, ttl, priority, job_id=c.job_id).encode()
        for p, c in zip([payload, b"", payload], many, strict=True)]
    assert many[0].job_id == many[2].job_id == job_id != many[1].job_id
    assert uuid.UUID(many[1].job_id).version == 4


def test_encoded_add_refuses_what_add_refuses() -> None:
    cases = [
        (("a b", b"", 1, 1), {}, "Invalid name"),
        (("a", b"x" * (MAX_PAYLOAD + 1), 1, 1), {}, "Invalid payload size"),
        (("a", "str", 1, 1), {}, "Invalid payload size"),
        (("a", b"", 0, 1), {}, "Invalid TTR"),
        (("a", b"", 1, 2_592_000_001), {}, "Invalid TTL"),
        (("a", b"", 1, 1), {"priority": True}, "Invalid Priority"),
        (("a", b"", 1, 1), {"max_attempts": 256}, "Invalid max attempts"),
        (("a", b"", 1, 1), {"max_fails": 1.0}, "Invalid max fails"),
        # Falsy but not an int: refused, as the short path of a plain add must not miss.
        (("a", b"", 1, 1), {"priority": 0.0}, "Invalid Priority"),
        (("a", b"", 1, 1), {"max_attempts": False}, "Invalid max attempts"),
        (("a", b"", 1, 1), {"max_fails": 0.0}, "Invalid max fails"),
        (("a", b"", 1.0, 1), {}, "Invalid TTR"),
        (("a", bytearray(b"x" * (MAX_PAYLOAD + 1)), 1, 1), {}, "Invalid payload size"),
        (("a", b"", 1, 1), {"job_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c4"}, "Invalid ID"),
        (("bad name", b"x" * (MAX_PAYLOAD + 1), 0, 1), {}, "Invalid name"),  # first in order
    ]
    for args, kwargs, text in cases:
        for build in (Add, EncodedAdd):
            with pytest.raises(InvalidArgument) as info:
                build(*args, **kwargs)  # type: ignore[arg-type]
            assert info.value.server_text == text, (build, args, kwargs)
    # In a batch: the shared fields with the first add, then each payload and id in turn.
    with pytest.raises(InvalidArgument) as info:
        EncodedAdd.many("a", [b"x" * (MAX_PAYLOAD + 1)], 0, 1)  # the payload comes before ttr
    assert info.value.server_text == "Invalid payload size"
    with pytest.raises(InvalidArgument) as info:
        EncodedAdd.many("a", [b"", b"x" * (MAX_PAYLOAD + 1)], 0, 1)
    assert info.value.server_text == "Invalid TTR"
    with pytest.raises(InvalidArgument) as info:
        EncodedAdd.many("a", [b"", b"", b"x" * (MAX_PAYLOAD + 1)], 1, 1)
    assert info.value.server_text == "Invalid payload size"
    with pytest.raises(InvalidArgument) as info:
        EncodedAdd.many("a", [b"", b""], 1, 1, 0, [ID4, "nope"])
    assert info.value.server_text == "Invalid ID"
    assert EncodedAdd.many("a", [], 1, 1) == []
    with pytest.raises(LocalProtocolError, match="2 job ids for 1 payloads"):
        EncodedAdd.many("a", [b""], 1, 1, 0, [ID4, ID5])


def test_encoded_add_is_read_only() -> None:
    add = EncodedAdd("a", b"x", 1, 1, job_id=ID4)
    with pytest.raises(AttributeError):
        add.job_id = ID5
    assert add.job_id == ID4 and ID4 in repr(add)


def test_generated_ids_are_canonical_uuid4s() -> None:
    ids = [new_id() for _ in range(2000)] + new_ids(2000) + new_ids(1)
    assert len(set(ids)) == len(ids) and new_ids(0) == []
    for job_id in ids:
        parsed = uuid.UUID(job_id)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, job_id)
        assert validate_id(job_id) == job_id


def test_only_canonical_v4_ids_skip_parsing() -> None:
    class Id(str):
        pass

    assert type(validate_id(Id(ID4))) is str
    assert validate_id(ID4.upper()) == ID4
    assert validate_id("{" + ID4 + "}") == ID4
    for bad in ["6ba7b810-9dad-11d1-80b4-00c04fd430c4",  # version 1
                "6ba7b810-9dad-41d1-c0b4-00c04fd430c4",  # not the RFC 4122 variant
                ID4 + "\n", " " + ID4]:
        with pytest.raises(InvalidArgument):
            validate_id(bad)


def test_a_name_once_valid_does_not_let_others_through() -> None:
    class Name(str):
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return hash("ok")

    Add("ok", b"", 1, 1)
    with pytest.raises(InvalidArgument):
        Add(Name("bad name"), b"", 1, 1)
    with pytest.raises(InvalidArgument):
        EncodedAdd(Name("bad name"), b"", 1, 1)


def test_runs_of_ok_replies_take_the_short_path_only_when_they_answer_oks() -> None:
    conn = Connection()
    for _ in range(3):
        conn.send(Add("a", b"", 1, 1))
    assert conn.receive_batch(b"+OK\r\n" * 3) == [OK, OK, OK]
    assert conn.pending == 0 and conn.next_event() is NEED_DATA
    # Not a run of whole OK lines, more OKs than commands, a partial line buffered: no.
    conn.send(Add("a", b"", 1, 1))
    for data in [b"+OK\r\n+OK\r\n", b"+OK\r\n+OK", b"+OK\n", b"-NOT-FOUND\r\n", b"",
                 b"+OK 1\r\n"]:
        assert conn.receive_batch(data) is None
    conn.receive_data(b"+O")
    assert conn.receive_batch(b"K\r\n") is None
    conn.receive_data(b"K\r\n")
    assert drain(conn) == [OK]
    # A bare OK cannot answer a lease: the short path leaves it to the parser, which refuses.
    conn.send(Add("a", b"", 1, 1))
    conn.send(Lease(("a",), 0))
    assert conn.receive_batch(b"+OK\r\n+OK\r\n") is None
    conn.receive_data(b"+OK\r\n+OK\r\n")
    assert conn.next_event() == OK
    with pytest.raises(RemoteProtocolError, match="cannot answer"):
        conn.next_event()
    assert conn.receive_batch(b"+OK\r\n") is None  # poisoned


def test_no_ok_short_path_once_the_connection_is_out_of_step() -> None:
    conn = Connection()
    conn.send(Add("a", b"", 1, 1))
    conn.send(Add("a", b"", 1, 1))
    conn.receive_data(b"-CLIENT-ERROR Invalid payload size\r\n")
    assert conn.next_event() == ErrorReply(ErrorKind.CLIENT_ERROR, "Invalid payload size")
    assert conn.receive_batch(b"+OK\r\n") is None
    assert isinstance(conn.next_event(), ConnectionClosed)


def test_the_session_completes_ok_runs_in_order_and_errors_in_place() -> None:
    session = WorkqSession()
    pendings = [session.submit(Add("a", b"", 1, 1)) for _ in range(4)]
    session.receive_data(b"+OK\r\n+OK\r\n")
    assert [p.done for p in pendings] == [True, True, False, False]
    session.receive_data(b"-CLIENT-ERROR Duplicate job\r\n")
    assert isinstance(pendings[2].error, DuplicateJob)
    assert session.data_to_send().count(b"add ") == 4
    assert isinstance(pendings[3].error, ConnectionLost)  # out of step: failed, not answered
