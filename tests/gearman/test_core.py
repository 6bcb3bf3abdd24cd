"""The Sans-IO cores: packets in both directions, the client/worker role, the server role and the
admin text protocol, with gearmand 1.1.20's recorded transcript as test vectors."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gearman_client import _packets as pk
from gearman_client._admin import (
    AdminConnection,
    AdminError,
    AdminList,
    AdminOk,
    CancelJob,
    CreateFunction,
    DropFunction,
    GetPid,
    LineTooLong,
    MaxQueue,
    PriorityStatusCommand,
    ShowJobs,
    ShowUniqueJobs,
    Shutdown,
    Status,
    Verbose,
    Version,
    Workers,
    parse_jobs,
    parse_priority_status,
    parse_status,
    parse_workers,
)
from gearman_client._events import NEED_DATA, Answer, ConnectionClosed, Unanswered, WrongMagic
from gearman_client._protocol import CLIENT_SENDS, SERVER_SENDS, Connection
from gearman_client._server_protocol import AdminLine, ServerConnection
from gearman_client._session import AdminSession, GearmanSession
from gearman_client.errors import JobFailed, QueueFull, ServerError
from jobwire._core import ConnectionState
from jobwire.errors import ConnectionLost, LocalProtocolError, RemoteProtocolError

from ..conftest import TRANSCRIPTS

TRANSCRIPT = [
    json.loads(line)
    for line in (TRANSCRIPTS / "gearmand-1.1.20.jsonl").read_text().splitlines()
]
BINARY = [ex for ex in TRANSCRIPT if ex["kind"] == "binary"]
TEXT = [ex for ex in TRANSCRIPT if ex["kind"] == "text"]
#: What a client can send: not bad magic, unknown types or requests with RES magic (those are
#: server-role vectors, replayed in test_transcript_server_role_every_split).
CLIENT_BINARY = [ex for ex in BINARY if bytes.fromhex(ex["send_hex"])[:4] == b"\0REQ"
                 and int.from_bytes(bytes.fromhex(ex["send_hex"])[4:8], "big") <= 42]


def drain(conn: Any) -> list[Any]:
    out = []
    while (event := conn.next_event()) is not NEED_DATA:
        out.append(event)
        if isinstance(event, ConnectionClosed):
            break
    return out


def splits(data: bytes) -> list[list[bytes]]:
    """The input whole, and cut in two at every boundary."""
    return [[data]] + [[data[:i], data[i:]] for i in range(1, len(data))]


def server_parse(data: bytes) -> list[Any]:
    conn = ServerConnection()
    conn.receive_data(data)
    return drain(conn)


# -- every packet type, both directions ---------------------------------------------------------

SAMPLE = {"bytes": b"v", "int": 7, "Progress": 3, "bool": True}


def sample(cls: type[pk.Packet]) -> pk.Packet:
    values = []
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    for i, f in enumerate(fields):
        if f.name in ("data", "text") and i == len(fields) - 1:
            values.append(b"last\0arg\0with NULs")
        else:
            values.append(SAMPLE[str(f.type)])
    return cls(*values)


def test_all_42_types_are_declared() -> None:
    assert sorted(pk.PACKETS) == list(range(1, 43))
    assert {cls.TYPE for cls in pk.PACKETS.values()} == set(pk.PacketType)


@pytest.mark.parametrize("ptype", sorted(pk.PACKETS))
def test_every_packet_round_trips(ptype: int) -> None:
    cls = pk.PACKETS[ptype]
    packet = sample(cls)
    for magic in (pk.REQ, pk.RES):
        data = pk.encode_packet(packet, magic)
        assert data[:4] == magic and int.from_bytes(data[4:8], "big") == ptype
        assert int.from_bytes(data[8:12], "big") == len(data) - 12
        decoder = pk.PacketDecoder(magic)
        for part in splits(data)[-1]:
            decoder.feed(part)
        assert decoder.next_packet() == packet


@pytest.mark.parametrize("cls", sorted(CLIENT_SENDS, key=lambda c: c.TYPE))
def test_client_role_sends_every_request_type_and_server_role_reads_it(
    cls: type[pk.Packet],
) -> None:
    packet = sample(cls)
    data = Connection().send(packet)
    assert server_parse(data) == [packet]


@pytest.mark.parametrize("cls", sorted(SERVER_SENDS, key=lambda c: c.TYPE))
def test_server_role_sends_every_response_type(cls: type[pk.Packet]) -> None:
    packet = sample(cls)
    data = ServerConnection().send(packet)
    assert data[:4] == pk.RES
    assert pk.decode_body(cls.TYPE, data[12:]) == packet


def test_roles_refuse_the_other_sides_packets() -> None:
    with pytest.raises(LocalProtocolError):
        Connection().send(pk.JobCreated(b"H:x:1"))
    with pytest.raises(LocalProtocolError):
        ServerConnection().send(pk.SubmitJob(b"f", b"", b""))


# -- validation on the send path ----------------------------------------------------------------


@pytest.mark.parametrize(
    "packet",
    [
        pk.SubmitJob(b"", b"", b"x"),
        pk.SubmitJob(b"f\0g", b"", b"x"),
        pk.SubmitJobBg(b"f", b"u" * 64, b"x"),
        pk.SubmitJobBg(b"f", b"a\0b", b"x"),
        pk.CanDo(b""),
        pk.CanDo(b"a\0b"),
        pk.CanDoTimeout(b"f", -1),
        pk.GetStatus(b""),
        pk.GetStatus(b"H" * 65),
        pk.WorkComplete(b"H:x\0:1", b"d"),
        pk.GetStatusUnique(b"u" * 64),
        pk.SubmitJobEpoch(b"f", b"", -5, b"d"),
        pk.SubmitReduceJob(b"f", b"", b"", b"", b"d"),
        pk.SubmitJob("f", b"", b"x"),  # type: ignore[arg-type]
        pk.WorkStatus(b"H:1", True, 2),
        pk.SetClientId(b""),
        pk.SetClientId(b"two words"),
        pk.SetClientId(b"forged\n1 127.0.0.1 admin : everything"),
    ],
)
def test_invalid_packets_are_refused_before_anything_is_sent(packet: pk.Packet) -> None:
    conn = Connection()
    with pytest.raises(LocalProtocolError):
        conn.send(packet)
    assert conn.awaiting_answers == 0
    assert conn.send(pk.EchoReq(b"still usable"))


def test_unique_of_63_bytes_is_fine() -> None:
    assert Connection().send(pk.SubmitJobBg(b"f", b"u" * 63, b"x"))


def test_priority_must_be_the_enum() -> None:
    assert type(pk.submit_packet(b"f", b"d", priority=pk.Priority.HIGH)) is pk.SubmitJobHigh
    assert type(pk.submit_packet(b"f", b"d", priority=pk.Priority.LOW, background=True)) is (
        pk.SubmitJobLowBg
    )
    with pytest.raises(LocalProtocolError):
        pk.submit_packet(b"f", b"d", priority="high")  # type: ignore[arg-type]


# -- the transcript as test vectors ------------------------------------------------------------


def test_client_vectors_cover_the_transcript() -> None:
    assert len(CLIENT_BINARY) == len(BINARY) - 3  # bad magic, type 99, RES magic as a request


@pytest.mark.parametrize("ex", CLIENT_BINARY, ids=[ex["note"] for ex in CLIENT_BINARY])
def test_transcript_client_role(ex: dict[str, str]) -> None:
    sent = bytes.fromhex(ex["send_hex"])
    received = bytes.fromhex(ex["recv_hex"])
    requests = server_parse(sent)
    if any(isinstance(r, pk.Submit) and len(r.unique) > pk.MAX_UNIQUE for r in requests):
        with pytest.raises(LocalProtocolError, match="unique"):
            Connection().send(requests[0])
        return  # refused before sending: gearmand's ARGUMENT_TOO_LARGE cannot happen
    for parts in splits(received):
        conn = Connection()
        out = b"".join(conn.send(r) for r in requests)
        assert out == sent  # our encoding is byte-identical to what gearmand was sent
        events: list[Any] = []
        for part in parts:
            conn.receive_data(part)
            events += drain(conn)
        replies = [e.reply if isinstance(e, Answer) else e for e in events]
        assert b"".join(ServerConnection().send(r) for r in replies) == received
        for event in events:
            if isinstance(event, Answer):
                assert event.request in requests


def test_transcript_details() -> None:
    by_note = {ex["note"]: ex for ex in BINARY}

    def answers(note: str, requests: list[pk.Packet]) -> list[pk.Packet]:
        conn = Connection()
        for r in requests:
            conn.send(r)
        conn.receive_data(bytes.fromhex(by_note[note]["recv_hex"]))
        return [e.reply for e in drain(conn)]

    assert answers("GET_STATUS of an unknown handle -> known=0", [pk.GetStatus(b"H:nope:1")]) == [
        pk.StatusRes(b"H:nope:1", False, False, 0, 0)
    ]
    assert answers(
        "GET_STATUS_UNIQUE u1 -> STATUS_RES_UNIQUE starts with the unique",
        [pk.GetStatusUnique(b"u1")],
    ) == [pk.StatusResUnique(b"u1", True, False, 0, 0, 0)]
    coalesced = answers(
        "SUBMIT_JOB_BG with unique 'u1' twice -> same handle (coalesced)",
        [pk.SubmitJobBg(b"reverse", b"u1", b"a"), pk.SubmitJobBg(b"reverse", b"u1", b"b")],
    )
    assert coalesced[0] == coalesced[1] == pk.JobCreated(b"H:vm:2")
    [err] = answers("SUBMIT_JOB_BG on a full queue -> ERROR QUEUE_ERROR",
                    [pk.SubmitJobBg(b"reverse", b"", b"full")])
    assert err == pk.Error(b"QUEUE_ERROR", b"Job queue is full")


@pytest.mark.parametrize("ex", BINARY, ids=[ex["note"] for ex in BINARY])
def test_transcript_server_role_every_split(ex: dict[str, str]) -> None:
    sent = bytes.fromhex(ex["send_hex"])
    try:
        whole: list[Any] = server_parse(sent)
    except RemoteProtocolError:
        whole = ["error"]
    for parts in splits(sent):
        conn = ServerConnection()
        events: list[Any] = []
        try:
            for part in parts:
                conn.receive_data(part)
                events += drain(conn)
        except RemoteProtocolError:
            events.append("error")
        assert events == whole
    if ex["recv_hex"] == "3c454f463e":  # "<EOF>": gearmand closed the connection
        assert whole == ["error"]


@given(st.data())
def test_whole_binary_transcript_split_anywhere(data: st.DataObject) -> None:
    """Client role: all replies of the transcript, concatenated and cut at arbitrary points."""
    requests: list[pk.Packet] = []
    stream = b""
    for ex in BINARY:
        try:
            reqs = server_parse(bytes.fromhex(ex["send_hex"]))
        except RemoteProtocolError:
            continue
        if any(isinstance(r, WrongMagic) for r in reqs):
            continue
        if any(isinstance(r, pk.Submit) and len(r.unique) > pk.MAX_UNIQUE for r in reqs):
            continue
        requests += reqs
        stream += bytes.fromhex(ex["recv_hex"])
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=30)))
    conn = Connection()
    for r in requests:
        conn.send(r)
    events: list[Any] = []
    last = 0
    for cut in [*cuts, len(stream)]:
        conn.receive_data(stream[last:cut])
        last = cut
        events += drain(conn)
    assert b"".join(
        ServerConnection().send(e.reply if isinstance(e, Answer) else e) for e in events
    ) == stream
    assert conn.awaiting_answers == 0


# -- client role behaviour ----------------------------------------------------------------------


def res(packet: pk.Packet) -> bytes:
    return pk.encode_packet(packet, pk.RES)


def test_unsolicited_packets_interleave_with_answers() -> None:
    conn = Connection()
    conn.send(pk.SubmitJob(b"f", b"", b"a"))
    conn.send(pk.GetStatus(b"H:x:1"))
    stream = (
        res(pk.JobCreated(b"H:x:1"))
        + res(pk.WorkData(b"H:x:1", b"part"))
        + res(pk.Noop())
        + res(pk.Error(b"JOB_NOT_FOUND", b"late"))
        + res(pk.StatusRes(b"H:x:1", True, True, 1, 2))
        + res(pk.WorkComplete(b"H:x:1", b"done"))
    )
    conn.receive_data(stream)
    events = drain(conn)
    assert events[0] == Answer(pk.SubmitJob(b"f", b"", b"a"), pk.JobCreated(b"H:x:1"))
    assert events[1] == pk.WorkData(b"H:x:1", b"part")
    assert events[2] == pk.Noop()
    assert events[3] == pk.Error(b"JOB_NOT_FOUND", b"late")  # unsolicited: answers a WORK_*
    assert events[4] == Answer(pk.GetStatus(b"H:x:1"), pk.StatusRes(b"H:x:1", True, True, 1, 2))
    assert events[5] == pk.WorkComplete(b"H:x:1", b"done")


def test_error_with_nothing_waiting_is_unsolicited() -> None:
    conn = Connection()
    conn.receive_data(res(pk.Error(b"X", b"y")))
    assert drain(conn) == [pk.Error(b"X", b"y")]


def test_work_fail_with_trailing_nul_is_tolerated() -> None:
    conn = Connection()
    conn.receive_data(pk.RES + (14).to_bytes(4, "big") + (7).to_bytes(4, "big") + b"H:x:12\0")
    assert drain(conn) == [pk.WorkFail(b"H:x:12")]


@pytest.mark.parametrize(
    "stream",
    [
        b"\0BAD" + bytes(8),
        pk.RES + (99).to_bytes(4, "big") + bytes(4),
        pk.RES + (7).to_bytes(4, "big") + bytes(4),  # SUBMIT_JOB from a server
        res(pk.JobCreated(b"H:x:1")),  # nothing was submitted
        pk.RES + (20).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"a\0b",  # too few args
        pk.RES + (6).to_bytes(4, "big") + (1).to_bytes(4, "big") + b"x",  # NOOP with a body
        res(pk.WorkStatus(b"H", 1, 2)).replace(b"\x001\x00", b"\x00x\x00"),
    ],
)
def test_garbage_from_the_server_poisons_the_connection(stream: bytes) -> None:
    conn = Connection()
    conn.receive_data(stream)
    with pytest.raises(RemoteProtocolError):
        drain(conn)
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    with pytest.raises(RemoteProtocolError):
        conn.send(pk.EchoReq(b"x"))


def test_bad_magic_is_caught_from_the_first_four_bytes() -> None:
    conn = Connection()
    conn.receive_data(b"HTTP")
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


def test_body_cap_refuses_from_the_header() -> None:
    conn = Connection(max_body_size=100)
    conn.send(pk.EchoReq(b"x"))
    conn.receive_data(pk.RES + (17).to_bytes(4, "big") + (101).to_bytes(4, "big"))
    with pytest.raises(RemoteProtocolError, match="limit"):
        conn.next_event()
    conn = Connection(max_body_size=100)
    conn.send(pk.EchoReq(b"x"))
    conn.receive_data(res(pk.EchoRes(b"x" * 100)))
    assert drain(conn) == [Answer(pk.EchoReq(b"x"), pk.EchoRes(b"x" * 100))]


def test_default_cap_is_64_mib_and_a_big_body_arrives_in_pieces() -> None:
    assert pk.DEFAULT_MAX_BODY_SIZE == 64 * 1024 * 1024
    body = bytes(range(256)) * (64 * 1024 * 4)  # 64 MiB exactly
    data = res(pk.EchoRes(body))
    conn = Connection()
    conn.send(pk.EchoReq(b"x"))
    view = memoryview(data)
    events: list[Any] = []
    for i in range(0, len(data), 1 << 18):
        conn.receive_data(bytes(view[i : i + (1 << 18)]))
        events += drain(conn)
    assert len(events) == 1 and events[0].reply.data == body
    conn = Connection()
    conn.receive_data(pk.RES + (17).to_bytes(4, "big") + (len(body) + 1).to_bytes(4, "big"))
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


def test_data_after_eof_raises_and_is_not_fed() -> None:
    conn = Connection()
    conn.send(pk.EchoReq(b"x"))
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after EOF"):
        conn.receive_data(res(pk.EchoRes(b"x")))
    assert drain(conn) == [ConnectionClosed(1, False)]


def test_the_state_is_the_shared_cores() -> None:
    conn = Connection()
    states = [conn.state]
    conn.receive_data(b"")
    assert drain(conn) == [ConnectionClosed(0, False)]
    states.append(conn.state)
    assert states == [ConnectionState.OPEN, ConnectionState.CLOSED]


def test_eof_reports_pending_and_partial() -> None:
    conn = Connection()
    conn.send(pk.SubmitJob(b"f", b"", b"d"))
    conn.receive_data(res(pk.JobCreated(b"H:1"))[:5])
    conn.receive_data(b"")
    assert drain(conn) == [ConnectionClosed(1, True)]
    with pytest.raises(LocalProtocolError):
        conn.send(pk.EchoReq(b"x"))


# -- server role --------------------------------------------------------------------------------


def test_server_role_reads_admin_lines_and_packets_mixed() -> None:
    data = b"status\r\n" + pk.encode_packet(pk.EchoReq(b"x"), pk.REQ) + b"version\n"
    for parts in splits(data):
        conn = ServerConnection()
        events: list[Any] = []
        for part in parts:
            conn.receive_data(part)
            events += drain(conn)
        assert events == [AdminLine("status"), pk.EchoReq(b"x"), AdminLine("version")]


def test_server_role_wrong_magic_and_eof() -> None:
    conn = ServerConnection()
    conn.receive_data(pk.encode_packet(pk.EchoRes(b"x"), pk.RES))
    conn.receive_data(b"")
    assert drain(conn) == [WrongMagic(17), ConnectionClosed(0, False)]


def test_server_role_admin_line_cap() -> None:
    conn = ServerConnection()
    conn.receive_data(b"x" * 70000)
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


# -- admin protocol -----------------------------------------------------------------------------

ADMIN_COMMANDS = {
    "version\n": Version(),
    "status\n": Status(),
    "workers\n": Workers(),
    "getpid\n": GetPid(),
    "verbose\n": Verbose(),
    "prioritystatus\n": PriorityStatusCommand(),
    "show jobs\n": ShowJobs(),
    "show unique jobs\n": ShowUniqueJobs(),
    "maxqueue reverse 1\n": MaxQueue("reverse", (1,)),
    "cancel job H:nope:9\n": CancelJob("H:nope:9"),
    "shutdown\n": Shutdown(),
}


#: The transcript's admin lines our client can send (not "frobnicate", not a bare "maxqueue").
ADMIN_TEXT = [ex for ex in TEXT if ex["send"] in ADMIN_COMMANDS]


def test_admin_vectors_cover_the_transcript() -> None:
    assert len(ADMIN_TEXT) == len(TEXT) - 2


@pytest.mark.parametrize("ex", ADMIN_TEXT, ids=[ex["note"] for ex in ADMIN_TEXT])
def test_transcript_admin(ex: dict[str, str]) -> None:
    command = ADMIN_COMMANDS[ex["send"]]
    received = ex["recv"].encode("latin-1")
    results = set()
    for parts in splits(received):
        conn = AdminConnection()
        # the transcript's lines end in LF; gearadmin and we send CRLF (docs/gearman.md)
        assert conn.send(command) == ex["send"].removesuffix("\n").encode() + b"\r\n"
        events: list[Any] = []
        for part in parts:
            conn.receive_data(part)
            events += drain(conn)
        assert len(events) == 1 and events[0][0] == command
        results.add(events[0][1])
    assert len(results) == 1


def admin_reply(command: Any, text: bytes) -> Any:
    conn = AdminConnection()
    conn.send(command)
    conn.receive_data(text)
    [(_, reply)] = drain(conn)
    return reply


def test_admin_records_from_the_transcript() -> None:
    by_note = {ex["note"]: ex["recv"].encode() for ex in TEXT}
    assert admin_reply(Version(), by_note["version"]) == AdminOk("1.1.20+ds")
    assert admin_reply(Status(), by_note["status on an empty server: a bare '.\\n'"]) == (
        AdminList(())
    )
    reply = admin_reply(Workers(), by_note["workers with a registered worker"])
    assert parse_workers(reply.lines)[-1].client_id == "worker-1"
    workers = parse_workers(reply.lines)
    assert [w.fd for w in workers] == [38, 39, 40]
    assert workers[2].functions == ("reverse",) and workers[0].functions == ()
    status = parse_status(admin_reply(Status(), by_note["status after submits"]).lines)
    assert [(s.function, s.queued, s.running, s.workers) for s in status] == [("reverse", 3, 0, 0)]
    prio = parse_priority_status(
        admin_reply(PriorityStatusCommand(), by_note["prioritystatus"]).lines
    )
    assert (prio[0].high, prio[0].normal, prio[0].low, prio[0].workers) == (0, 3, 0, 0)
    jobs = parse_jobs(admin_reply(ShowJobs(), by_note["show jobs"]).lines)
    assert [j.handle for j in jobs] == [b"H:vm:1", b"H:vm:2", b"H:vm:3"]
    assert jobs[0].retries == 0 and jobs[0].queued and not jobs[0].ignore_job
    unique_jobs = admin_reply(ShowUniqueJobs(), by_note["show unique jobs"])
    assert unique_jobs == AdminList((b"", b"", b"u1"))
    assert admin_reply(GetPid(), by_note["getpid"]) == AdminOk("23759")
    assert admin_reply(Shutdown(), by_note["shutdown is not implemented in 1.1.20"]) == AdminError(
        "UNKNOWN_COMMAND", "Unknown server commandshutdown"
    )
    assert admin_reply(CancelJob("H:nope:9"), by_note["cancel job unknown"]) == AdminError(
        "UNKNOWN_JOB"
    )
    assert admin_reply(Status(), b"ERR X y+z\n") == AdminError("X", "y z")


def test_admin_pipelined_replies_split_everywhere() -> None:
    commands = [
        Version(), Status(), MaxQueue("f"), Workers(), CreateFunction("f"), DropFunction("f")
    ]
    stream = b"OK 1\nf\t1\t0\t0\r\n.\nOK\r\n.\nOK\r\nERR NOPE x\r\n"
    for parts in splits(stream):
        conn = AdminConnection()
        for c in commands:
            conn.send(c)
        events: list[Any] = []
        for part in parts:
            conn.receive_data(part)
            events += drain(conn)
        assert [r for _, r in events] == [
            AdminOk("1"), AdminList((b"f\t1\t0\t0",)), AdminOk(""), AdminList(()), AdminOk(""),
            AdminError("NOPE", "x"),
        ]


@pytest.mark.parametrize(
    "command",
    [CancelJob("H:1\nshutdown"), CreateFunction(""), DropFunction("a b"), MaxQueue("f", (1, 2)),
     MaxQueue("f\0", ())],
)
def test_admin_injection_is_refused(command: Any) -> None:
    with pytest.raises(LocalProtocolError):
        AdminConnection().send(command)


@pytest.mark.parametrize("stream", [b"what\n", b"x" * 70000, b"OK\nOK\n"])
def test_admin_garbage(stream: bytes) -> None:
    conn = AdminConnection()
    conn.send(Verbose())
    conn.receive_data(stream)
    with pytest.raises(RemoteProtocolError):
        drain(conn)
    with pytest.raises(RemoteProtocolError):
        conn.send(Verbose())


def test_workers_lines_as_gearmand_prints_foreign_client_ids() -> None:
    """Lines recorded from gearmand 1.1.20 (SET_CLIENT_ID sent raw by foreign workers): the id
    is printed verbatim, so functions follow the last " :" that a space or the end follows, and
    a newline in an id continues the entry on the next line."""
    lines = (
        b"31 127.0.0.1 - :", b"30 127.0.0.1 - : noid", b"29 127.0.0.1 trail  : f14",
        b"28 127.0.0.1  :  : f13", b"27 127.0.0.1 : : f12", b"25 127.0.0.1  lead : f10",
        b"24 127.0.0.1 \xff\xfe : f9", b"23 127.0.0.1 cr\rx : f8", b"22 127.0.0.1 nl",
        b"x : f7", b"21 127.0.0.1 ctl\x01x : f6", b"20 127.0.0.1 tab\there : f5",
        b"19 127.0.0.1 x : : f4", b"18 127.0.0.1 a : b : f3", b"17 127.0.0.1 a:b : f2",
        b"16 127.0.0.1  : co:lon f1", b"15 127.0.0.1 my worker : g0 f0",
        b"38 ::1 - :", b"39 127.0.0.1 a :b : f",
    )
    got = [(w.fd, w.address, w.client_id, w.functions) for w in parse_workers(lines)]
    assert got == [
        (31, "127.0.0.1", "-", ()), (30, "127.0.0.1", "-", ("noid",)),
        (29, "127.0.0.1", "trail ", ("f14",)), (28, "127.0.0.1", " : ", ("f13",)),
        (27, "127.0.0.1", ":", ("f12",)), (25, "127.0.0.1", " lead", ("f10",)),
        (24, "127.0.0.1", "\udcff\udcfe", ("f9",)), (23, "127.0.0.1", "cr\rx", ("f8",)),
        (22, "127.0.0.1", "nl\nx", ("f7",)), (21, "127.0.0.1", "ctl\x01x", ("f6",)),
        (20, "127.0.0.1", "tab\there", ("f5",)), (19, "127.0.0.1", "x :", ("f4",)),
        (18, "127.0.0.1", "a : b", ("f3",)), (17, "127.0.0.1", "a:b", ("f2",)),
        (16, "127.0.0.1", "", ("co:lon", "f1")), (15, "127.0.0.1", "my worker", ("g0", "f0")),
        (38, "::1", "-", ()), (39, "127.0.0.1", "a :b", ("f",)),
    ]
    for garbage in ((b"x : f",), (b"12 127.0.0.1 no-separator",), (b"12 127.0.0.1",)):
        with pytest.raises(RemoteProtocolError):
            parse_workers(garbage)


def test_err_without_a_code() -> None:
    """gearmand's ERR lines without an upper-case code keep all their words."""
    assert admin_reply(DropFunction("f"), b"ERR function not found\r\n") == (
        AdminError("", "function not found"))
    assert admin_reply(
        DropFunction("f"), b"ERR there are still connected workers or executing clients\r\n"
    ) == AdminError("", "there are still connected workers or executing clients")
    assert admin_reply(CancelJob("H:1"), b"ERR UNKNOWN_JOB\r\n") == AdminError("UNKNOWN_JOB")


def test_admin_commands_end_in_crlf() -> None:
    """gearmand 1.1.20 reads ``create function nf\\n`` as the function ``n``; gearadmin sends
    CRLF, so do we."""
    conn = AdminConnection()
    assert conn.send(CreateFunction("nf")) == b"create function nf\r\n"
    assert conn.send(Workers()) == b"workers\r\n"


def test_admin_records_reject_garbage() -> None:
    with pytest.raises(RemoteProtocolError):
        parse_status((b"f\t1\tx\t0",))
    with pytest.raises(RemoteProtocolError):
        parse_workers((b"nonsense",))
    with pytest.raises(RemoteProtocolError):
        parse_jobs((b"H:1\t0",))
    # function names with tabs keep them: the counts are the last columns
    assert parse_status((b"a\tb\t1\t2\t3",))[0].function == "a\tb"


# -- hypothesis: any packet sequence, any split -------------------------------------------------

_field_values = {
    "bytes": st.binary(max_size=20).filter(lambda b: b"\0" not in b),
    "int": st.integers(0, 2**40),
    "Progress": st.integers(0, 2**40),
    "bool": st.booleans(),
}


@st.composite
def server_packets(draw: st.DrawFn) -> pk.Packet:
    cls = draw(st.sampled_from(sorted(SERVER_SENDS, key=lambda c: c.TYPE)))
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    values = [draw(_field_values[str(f.type)]) for f in fields]
    if fields and fields[-1].name in ("data", "text"):  # only opaque last arguments hold NULs
        values[-1] = draw(st.binary(max_size=30))
    return cls(*values)


@given(st.lists(server_packets(), max_size=12), st.data())
def test_any_packet_stream_decodes_at_any_split(packets: list[pk.Packet], data: Any) -> None:
    stream = b"".join(pk.encode_packet(p, pk.RES) for p in packets)
    decoder = pk.PacketDecoder(pk.RES)
    out = []
    if stream:
        cuts = sorted(data.draw(st.sets(st.integers(0, len(stream)), max_size=10)))
        last = 0
        for cut in [*cuts, len(stream)]:
            decoder.feed(stream[last:cut])
            last = cut
            while (p := decoder.next_packet()) is not None:
                out.append(p)
    assert out == packets


# -- the session's foreground jobs (GearmanSession.submit) -----------------------------------------


def _res(*packets: pk.Packet) -> bytes:
    return b"".join(pk.encode_packet(p, pk.RES) for p in packets)


def test_session_submit_tracks_the_job_under_the_handle_job_created_names() -> None:
    session = GearmanSession()
    updates: list[pk.Packet] = []
    job = session.submit(pk.SubmitJob(b"f", b"", b"x"), updates.append)
    assert session.data_to_send() == Connection().send(pk.SubmitJob(b"f", b"", b"x"))
    session.receive_data(_res(pk.JobCreated(b"H:1")))
    assert not job.done and job.handle == b"H:1" and session.jobs == {b"H:1": [job]}
    session.receive_data(_res(pk.WorkData(b"H:1", b"d"), pk.WorkStatus(b"H:1", 1, 2),
                              pk.WorkComplete(b"H:1", b"r")))
    assert updates == [pk.WorkData(b"H:1", b"d"), pk.WorkStatus(b"H:1", 1, 2)]
    assert job.result() == b"r" and session.jobs == {} and session.in_flight == 0


def test_session_submit_answered_error_rejects_the_job_and_the_next_request_is_answered() -> None:
    session = GearmanSession()
    job = session.submit(pk.SubmitJobHigh(b"f", b"", b"x"))
    echo = session.request(pk.EchoReq(b"e"))
    session.receive_data(_res(pk.Error(b"QUEUE_ERROR", b"full"), pk.EchoRes(b"e")))
    with pytest.raises(QueueFull):
        job.result()
    assert echo.result() == pk.EchoRes(b"e") and session.jobs == {}


def test_session_submit_takes_only_foreground_submits_and_queues_nothing_else() -> None:
    session = GearmanSession()
    for packet in (pk.SubmitJobBg(b"f", b"", b"x"), pk.EchoReq(b"e")):
        with pytest.raises(LocalProtocolError, match="not a foreground submit"):
            session.submit(packet)
    with pytest.raises(LocalProtocolError):  # invalid: refused by the core, nothing queued
        session.submit(pk.SubmitJob(b"", b"", b"x"))
    assert session.data_to_send() == b"" and session.in_flight == 0


def test_session_failure_rejects_every_foreground_job_created_or_not() -> None:
    session = GearmanSession()
    running = session.submit(pk.SubmitJob(b"f", b"", b"x"))
    waiting = session.submit(pk.SubmitJobLow(b"f", b"u", b"y"))
    session.receive_data(_res(pk.JobCreated(b"H:1")))
    session.receive_data(b"")  # the server closed: both jobs end with ConnectionLost
    for job in (running, waiting):
        with pytest.raises(ConnectionLost):
            job.result()
    with pytest.raises(ConnectionLost):
        session.submit(pk.SubmitJob(b"f", b"", b"x"))


def test_coalesced_jobs_on_one_connection_all_get_the_result() -> None:
    session = GearmanSession()
    jobs = [session.submit(pk.SubmitJob(b"f", b"same", b"x")) for _ in range(3)]
    session.receive_data(_res(*[pk.JobCreated(b"H:9")] * 3, pk.WorkFail(b"H:9")))
    for job in jobs:
        with pytest.raises(JobFailed):
            job.result()


def test_a_job_given_up_before_job_created_is_not_filed_under_its_handle() -> None:
    # A submit that timed out (or was cancelled) before its JOB_CREATED came: the late answer
    # must not leave a tracker behind (it would stay until the job ended, maybe never).
    session = GearmanSession()
    job = session.submit(pk.SubmitJob(b"f", b"", b"x"))
    job.abandoned = True  # what the transport does when the caller's wait ends
    session.receive_data(_res(pk.JobCreated(b"H:1"), pk.WorkData(b"H:1", b"d")))
    assert session.jobs == {} and session.in_flight == 0 and not job.done


# -- a server that skips OPTION_REQ (OpenStack gear's gear.Server answers none) ------------------


def test_a_skipped_option_lets_the_next_reply_answer_the_next_request() -> None:
    conn = Connection()
    conn.send(pk.OptionReq(b"exceptions"))
    conn.send(pk.SubmitJobBg(b"f", b"", b"a"))
    conn.send(pk.GetStatus(b"H:x:1"))
    conn.receive_data(res(pk.JobCreated(b"H:x:1"))
                      + res(pk.StatusRes(b"H:x:1", True, False, 0, 0)))
    assert drain(conn) == [
        Unanswered(pk.OptionReq(b"exceptions")),
        Answer(pk.SubmitJobBg(b"f", b"", b"a"), pk.JobCreated(b"H:x:1")),
        Answer(pk.GetStatus(b"H:x:1"), pk.StatusRes(b"H:x:1", True, False, 0, 0)),
    ]
    assert conn.awaiting_answers == 0


@pytest.mark.parametrize("split", [False, True])
def test_an_answered_option_is_answered_and_an_unknown_one_refused(split: bool) -> None:
    conn = Connection()
    for packet in (pk.OptionReq(b"exceptions"), pk.OptionReq(b"bogus"), pk.EchoReq(b"e")):
        conn.send(packet)
    stream = (res(pk.OptionRes(b"exceptions"))
              + res(pk.Error(b"UNKNOWN_OPTION", b"Server does not recognize given option"))
              + res(pk.EchoRes(b"e")))
    events: list[Any] = []
    for chunk in ([stream[:5], stream[5:40], stream[40:]] if split else [stream]):
        conn.receive_data(chunk)
        events += drain(conn)
    assert [type(e) for e in events] == [Answer] * 3
    assert events[1].reply.code == b"UNKNOWN_OPTION"


def test_an_error_past_a_skipped_option_answers_the_next_request() -> None:
    # gear.Server refuses a submit with ERROR ("0", ACL) and never answers the option.
    session = GearmanSession()
    option = session.request(pk.OptionReq(b"exceptions"))
    job = session.submit(pk.SubmitJob(b"f", b"", b"x"))
    echo = session.request(pk.EchoReq(b"e"))
    session.receive_data(_res(pk.Error(b"0", b"Permission denied by ACL"), pk.EchoRes(b"e")))
    assert option.result() is None
    with pytest.raises(ServerError):
        job.result()
    assert echo.result() == pk.EchoRes(b"e")


def test_session_files_the_job_created_past_a_skipped_option() -> None:
    session = GearmanSession()
    option = session.request(pk.OptionReq(b"exceptions"))
    job = session.submit(pk.SubmitJob(b"f", b"", b"x"))
    background = session.request(pk.SubmitJobBg(b"f", b"", b"y"))
    stream = _res(pk.JobCreated(b"H:1"), pk.JobCreated(b"H:2"), pk.WorkComplete(b"H:1", b"r"))
    for i in range(len(stream)):  # byte by byte: the held reply survives a read boundary
        session.receive_data(stream[i:i + 1])
    assert option.result() is None
    assert background.result() == pk.JobCreated(b"H:2")
    assert job.result() == b"r" and session.jobs == {} and session.in_flight == 0


def test_a_reply_past_a_lone_option_is_still_a_desync() -> None:
    # Nothing waits behind the option: a JOB_CREATED answers nothing the client sent.
    conn = Connection()
    conn.send(pk.OptionReq(b"exceptions"))
    conn.receive_data(res(pk.JobCreated(b"H:x:1")))
    with pytest.raises(RemoteProtocolError, match="JobCreated while OptionReq"):
        conn.next_event()


def test_a_reply_past_a_skipped_option_that_fits_nothing_names_the_next_request() -> None:
    conn = Connection()
    conn.send(pk.OptionReq(b"exceptions"))
    conn.send(pk.EchoReq(b"e"))
    conn.receive_data(res(pk.JobCreated(b"H:x:1")))
    assert conn.next_event() == Unanswered(pk.OptionReq(b"exceptions"))
    with pytest.raises(RemoteProtocolError, match="JobCreated while EchoReq"):
        conn.next_event()


def test_a_skipped_options_reply_stays_buffered_until_the_next_call() -> None:
    conn = Connection()
    conn.send(pk.OptionReq(b"exceptions"))
    conn.send(pk.SubmitJobBg(b"f", b"", b"a"))
    conn.receive_data(res(pk.JobCreated(b"H:x:1")))
    conn.receive_data(b"")
    assert conn.next_event() == Unanswered(pk.OptionReq(b"exceptions"))
    assert conn._buffer  # the reply is still there, EOF or not
    assert drain(conn) == [
        Answer(pk.SubmitJobBg(b"f", b"", b"a"), pk.JobCreated(b"H:x:1")),
        ConnectionClosed(0, False),
    ]


def test_peek_packet_leaves_the_packet_for_next_packet() -> None:
    data = res(pk.Error(b"UNKNOWN_OPTION", b"no"))
    decoder = pk.PacketDecoder(pk.RES)
    decoder.feed(data[:-1])
    assert decoder.peek_packet() is None
    decoder.feed(data[-1:])
    assert decoder.peek_packet() == decoder.peek_packet() == pk.Error(b"UNKNOWN_OPTION", b"no")
    assert decoder.buffered == len(data)
    assert decoder.next_packet() == pk.Error(b"UNKNOWN_OPTION", b"no")
    assert decoder.buffered == 0 and decoder.peek_packet() is None
    decoder.feed(b"\0BAD")
    with pytest.raises(RemoteProtocolError, match="bad magic"):
        decoder.peek_packet()


# -- what the shared core (jobwire._core.InOrderClientCore) gives both cores -----------------------


def test_both_cores_report_the_close_once_then_need_data() -> None:
    conn = Connection()
    conn.send(pk.EchoReq(b"e"))
    conn.receive_data(res(pk.EchoRes(b"e"))[:-1])
    conn.receive_data(b"")
    admin = AdminConnection()
    admin.send(Status())
    admin.receive_data(b"f\t1\t0\t1\n")
    admin.receive_data(b"")
    for core in (conn, admin):
        assert core.next_event() == ConnectionClosed(1, True)
        assert [core.next_event() for _ in range(3)] == [NEED_DATA] * 3
        assert core.state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError):
        conn.send(pk.EchoReq(b"e"))
    with pytest.raises(LocalProtocolError):
        admin.send(Version())


def test_the_admin_cores_poison_is_raised_again_as_it_was() -> None:
    conn = AdminConnection()
    conn.send(Verbose())
    conn.receive_data(b"x" * 70000)
    for call in (conn.next_event, conn.next_event, lambda: conn.send(Verbose())):
        with pytest.raises(LineTooLong):
            call()
    assert conn.state is ConnectionState.ERROR


def test_early_bytes_go_to_gearmans_core_as_any_bytes() -> None:
    """What arrived while the session was idle: a WORK_COMPLETE for a job this connection
    submitted still completes it (Gearman's core routes unasked packets), and the request
    queued meanwhile still gets its own answer."""
    session = GearmanSession()
    job = session.submit(pk.SubmitJob(b"f", b"", b"x"))
    session.receive_data(_res(pk.JobCreated(b"H:1")))
    assert session.idle
    echo = session.request(pk.EchoReq(b"e"))
    session.receive_early(_res(pk.Noop(), pk.WorkComplete(b"H:1", b"r")))
    assert job.result() == b"r" and not echo.done and session.broken is None
    session.receive_data(_res(pk.EchoRes(b"e")))
    assert echo.result() == pk.EchoRes(b"e")


def test_an_early_admin_line_answers_nothing() -> None:
    """The admin protocol is answered strictly in order and sends nothing unasked: a line that
    arrived while nothing was in flight is refused (issue 19's rule), not taken as the answer
    to the command queued next."""
    session = AdminSession()
    assert session.idle
    version = session.request(Version())
    session.receive_early(b"OK 0.0-stale\n")
    assert isinstance(session.broken, RemoteProtocolError)
    with pytest.raises(RemoteProtocolError, match="no command waiting"):
        version.result()

def test_an_empty_status_progress_reads_as_zero() -> None:
    # gear.Server's STATUS_RES for a job that never sent WORK_STATUS: numerator and denominator
    # empty; gearmand sends "0". Other non-numbers stay errors.
    body = b"H:x:1\x001\x000\x00\x00"
    conn = Connection()
    conn.send(pk.GetStatus(b"H:x:1"))
    conn.receive_data(pk.RES + (20).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body)
    assert drain(conn)[0].reply == pk.StatusRes(b"H:x:1", True, False, 0, 0)
    bad = body.replace(b"\x00\x00", b"\x00x\x00")
    conn = Connection()
    conn.send(pk.GetStatus(b"H:x:1"))
    conn.receive_data(pk.RES + (20).to_bytes(4, "big") + len(bad).to_bytes(4, "big") + bad)
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


def test_gears_work_fail_with_request_magic_is_read_and_nothing_else_is() -> None:
    # gear.Server sends WORK_FAIL with \0REQ magic when the worker of a client's job is lost.
    stream = pk.encode_packet(pk.WorkFail(b"H:x:1"), pk.REQ) + res(pk.Noop())
    for chunks in splits(stream):
        conn = Connection()
        events: list[Any] = []
        for chunk in chunks:
            conn.receive_data(chunk)
            events += drain(conn)
        assert events == [pk.WorkFail(b"H:x:1"), pk.Noop()]
    for other in (pk.WorkComplete(b"H:x:1", b"r"), pk.Noop()):
        conn = Connection()
        conn.receive_data(pk.encode_packet(other, pk.REQ))
        with pytest.raises(RemoteProtocolError, match="bad magic"):
            conn.next_event()
    conn = Connection()
    conn.receive_data(pk.REQ + b"\0\0\0\x0d")  # refused from the first 8 bytes (type 13)
    with pytest.raises(RemoteProtocolError, match="bad magic"):
        conn.next_event()
