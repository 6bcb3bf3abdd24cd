"""The client-role Sans-IO core: commands in, bytes out; bytes in, replies out."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from beanstalk_client._commands import (
    COMMANDS,
    MAX_LINE,
    Bury,
    Command,
    Delete,
    Ignore,
    Kick,
    KickJob,
    ListTubes,
    ListTubesWatched,
    ListTubeUsed,
    PauseTube,
    Peek,
    PeekBuried,
    PeekDelayed,
    PeekReady,
    Put,
    Quit,
    Release,
    Reserve,
    ReserveJob,
    ReserveWithTimeout,
    Stats,
    StatsJob,
    StatsTube,
    Touch,
    Use,
    Watch,
)
from beanstalk_client._events import (
    DELETED,
    NEED_DATA,
    PAUSED,
    RELEASED,
    TOUCHED,
    BuriedReply,
    ConnectionClosed,
    Deleted,
    ErrorCode,
    ErrorReply,
    Found,
    Inserted,
    Kicked,
    Ok,
    Paused,
    Released,
    Reply,
    Reserved,
    Touched,
    Using,
    Watching,
)
from beanstalk_client._protocol import Connection, ConnectionState
from beanstalk_client._session import Session
from jobwire.errors import LocalProtocolError, RemoteProtocolError
from tests.conftest import BEANSTALKD_TRANSCRIPT, fewer_examples

TRANSCRIPT = BEANSTALKD_TRANSCRIPT


def _exchanges() -> list[dict[str, str]]:
    with TRANSCRIPT.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


EXCHANGES = _exchanges()


def closed(pending: int = 0, partial: bool = False) -> tuple[str, int, bool]:
    """What :func:`norm` makes of a ``ConnectionClosed`` (its ``reason`` is free text)."""
    return ("closed", pending, partial)


def norm(event: Any) -> Any:
    if isinstance(event, ConnectionClosed):
        return closed(event.pending, event.partial)
    return event


def drain(conn: Connection) -> list[Any]:
    """Every event available without more input (stops after ConnectionClosed)."""
    events: list[Any] = []
    for _ in range(100_000):
        event = conn.next_event()
        if event is NEED_DATA:
            return events
        events.append(norm(event))
        if isinstance(event, ConnectionClosed):
            return events
    raise AssertionError("next_event never returned NEED_DATA")


def _nf() -> ErrorReply:
    return ErrorReply(ErrorCode.NOT_FOUND)


def _ok(*lines: str) -> Ok:
    return Ok(("---\n" + "".join(line + "\n" for line in lines)).encode())


def _job_stats(
    job_id: int, state: str, pri: int, age: int, delay: int, left: int, reserves: int,
    releases: int,
) -> Ok:
    return _ok(
        f"id: {job_id}", "tube: t-1", f"state: {state}", f"pri: {pri}", f"age: {age}",
        f"delay: {delay}", "ttr: 60", f"time-left: {left}", "file: 0", f"reserves: {reserves}",
        "timeouts: 0", f"releases: {releases}", "buries: 0", "kicks: 0",
    )


def _stats_body(exchange: dict[str, str]) -> Ok:
    # The stats document is long; the test checks its announced size matches and it is exact.
    recv = exchange["recv"].encode("latin-1")
    head, _, rest = recv.partition(b"\r\n")
    assert head == b"OK 956"
    assert len(rest) == 956 + 2 and rest.endswith(b"\n\r\n")
    return Ok(rest[:-2])


A200 = "a" * 200

# Index in the transcript -> (commands that produce its `send`, events its `recv` gives).
VALID: dict[int, tuple[list[Command[Any]], list[Any]]] = {
    0: ([Put(b"hello", 0, 0, 60)], [Inserted(1)]),
    1: ([Use("t-1")], [Using("t-1")]),
    2: ([Put(b"abc", 100, 0, 60), Put(b"def", 5, 2, 60)], [Inserted(2), Inserted(3)]),
    3: ([Put(b"\r\n\r\n", 0, 0, 60)], [Inserted(4)]),
    4: ([Put(b"", 0, 0, 60)], [Inserted(5)]),
    5: ([Put(b"x", 0, 0, 0)], [Inserted(6)]),
    7: (
        [Watch("t-1"), Ignore("default"), Ignore("t-1")],
        [Watching(2), Watching(1), ErrorReply(ErrorCode.NOT_IGNORED)],
    ),
    8: ([ListTubesWatched(), ListTubeUsed()], [_ok("- t-1"), Using("default")]),
    9: ([ReserveWithTimeout(0)], [Reserved(4, b"\r\n\r\n")]),
    10: (
        [StatsJob(2), StatsJob(4)],
        [_job_stats(2, "ready", 100, 3, 0, 0, 0, 0), _job_stats(4, "reserved", 0, 3, 0, 59, 1, 0)],
    ),
    11: (
        [ReserveWithTimeout(0), Touch(5), Release(5, 9, 3), StatsJob(5)],
        [Reserved(5, b""), TOUCHED, RELEASED, _job_stats(5, "delayed", 9, 3, 3, 2, 1, 1)],
    ),
    12: (
        [Use("t-1"), Peek(2), PeekReady(), PeekDelayed(), PeekBuried()],
        [Using("t-1"), Found(2, b"abc"), Found(6, b"x"), Found(5, b""), _nf()],
    ),
    13: (
        [StatsTube("t-1"), StatsTube("nope")],
        [
            _ok(
                "name: t-1", "current-jobs-urgent: 3", "current-jobs-ready: 3",
                "current-jobs-reserved: 1", "current-jobs-delayed: 1", "current-jobs-buried: 0",
                "total-jobs: 5", "current-using: 1", "current-watching: 1",
                "current-waiting: 0", "cmd-delete: 0", "cmd-pause-tube: 0", "pause: 0",
                "pause-time-left: 0",
            ),
            _nf(),
        ],
    ),
    14: ([ListTubes()], [_ok("- default", "- t-1")]),
    15: ([PauseTube("t-1", 0), PauseTube("nope", 1)], [PAUSED, _nf()]),
    16: ([Delete(999999)], [_nf()]),
    17: ([Use("empty-t"), Kick(10)], [Using("empty-t"), Kicked(0)]),
    18: ([KickJob(999999)], [_nf()]),
    19: ([ReserveJob(1)], [Reserved(1, b"hello")]),
    20: ([Bury(1, 7), KickJob(1)], [BuriedReply(None), Kicked(None)]),
    21: ([Release(999999, 0, 0)], [_nf()]),
    22: ([Touch(999999)], [_nf()]),
    23: ([Ignore("default")], [ErrorReply(ErrorCode.NOT_IGNORED)]),
    27: ([Use(A200)], [Using(A200)]),
    30: ([Use("a+b/c;d.e$f_g(h)")], [Using("a+b/c;d.e$f_g(h)")]),
    31: (
        [Put(b"z" * 1025, 0, 0, 60), ListTubeUsed()],
        [ErrorReply(ErrorCode.JOB_TOO_BIG), Using("default")],
    ),
    32: ([Put(b"z" * 1024, 0, 0, 60)], [Inserted(8)]),
    33: ([Stats()], [_stats_body(EXCHANGES[33])]),
    34: (
        [Use("ds"), Watch("ds"), Ignore("default"), Put(b"q", 0, 0, 2), Reserve()],
        [Using("ds"), Watching(2), Watching(1), Inserted(9), Reserved(9, b"q")],
    ),
    35: ([Reserve(), Delete(9)], [ErrorReply(ErrorCode.DEADLINE_SOON), DELETED]),
    36: ([Quit()], [closed(pending=0, partial=False)]),
}

# Exchanges whose `send` our commands cannot produce (deliberately bad input).
INVALID = {6, 24, 25, 26, 28, 29}


def test_every_transcript_exchange_is_covered() -> None:
    assert set(VALID) | INVALID == set(range(len(EXCHANGES)))
    assert not set(VALID) & INVALID


@pytest.mark.parametrize("index", sorted(VALID))
def test_transcript_vector(index: int) -> None:
    exchange = EXCHANGES[index]
    commands, expected = VALID[index]
    conn = Connection()
    sent = b"".join(conn.send(command) for command in commands)
    assert sent == exchange["send"].encode("latin-1")
    recv = exchange["recv"]
    conn.receive_data(b"" if recv == "<EOF>" else recv.encode("latin-1"))
    if recv == "<EOF>":
        assert drain(conn) == expected
        return
    assert drain(conn) == expected
    assert conn.pending == 0
    assert conn.state is ConnectionState.OPEN


@pytest.mark.parametrize("index", sorted(VALID))
def test_transcript_vector_one_byte_at_a_time(index: int) -> None:
    exchange = EXCHANGES[index]
    commands, expected = VALID[index]
    if exchange["recv"] == "<EOF>":
        return
    conn = Connection()
    for command in commands:
        conn.send(command)
    events = []
    for byte in exchange["recv"].encode("latin-1"):
        conn.receive_data(bytes([byte]))
        events.extend(drain(conn))
    assert events == expected


def test_stats_vector_is_exact_yaml() -> None:
    (event,) = VALID[33][1]
    assert event.data.startswith(b'---\ncurrent-jobs-urgent: 6\n')
    assert b'\nversion: "1.12"\n' in event.data
    assert event.data.endswith(b"\nos: #1 SMP PREEMPT_DYNAMIC @0\nplatform: x86_64\n")


# -- the exchanges we cannot produce: the constructors refuse ---------------------------------


def _assert_refused_and_nothing_sent(make: Any) -> None:
    conn = Connection()
    with pytest.raises(LocalProtocolError):
        conn.send(make())
    assert conn.pending == 0
    assert conn.state is ConnectionState.OPEN
    # the connection is untouched: the next command's bytes are its own and nothing else
    assert conn.send(ListTubeUsed()) == b"list-tube-used\r\n"
    conn.receive_data(b"USING default\r\n")
    assert drain(conn) == [Using("default")]


def test_exchange_6_size_mismatch_cannot_be_produced() -> None:
    # Put always announces the real size, so "put 0 0 10 1\r\nxyz" cannot be written ...
    assert Put(b"xyz", 0, 0, 10).encode() == b"put 0 0 10 3\r\nxyz\r\n"
    # ... and a body that is not bytes is refused before anything is sent.
    _assert_refused_and_nothing_sent(lambda: Put("xyz", 0, 0, 10))  # type: ignore[arg-type]


def test_exchange_24_unknown_command_cannot_be_produced() -> None:
    assert "frobnicate" not in COMMANDS
    assert len(COMMANDS) == 25
    assert all(cls.name == name for name, cls in COMMANDS.items())


def test_exchange_25_non_numeric_priority_refused() -> None:
    _assert_refused_and_nothing_sent(lambda: Put(b"a", "x", 0, 60))  # type: ignore[arg-type]


def test_exchange_26_tube_of_201_bytes_refused() -> None:
    _assert_refused_and_nothing_sent(lambda: Use("a" * 201))


def test_exchange_28_name_starting_with_hyphen_refused() -> None:
    _assert_refused_and_nothing_sent(lambda: Use("-abc"))


def test_exchange_29_no_command_line_exceeds_224_bytes() -> None:
    # The longest line any command can make: pause-tube with a 200-byte name and 2**32-1.
    longest = PauseTube("z" * 200, 2**32 - 1).encode()
    assert len(longest) == MAX_LINE == 224
    assert longest.endswith(b" 4294967295\r\n")


BAD_TUBES: list[object] = [
    "a" * 201, "-abc", "-", "", "a b", " a", "a ", "a\rb", "a\nb", "a\r\n", "a\x00b", "tübe",
    "ä", "a\tb", "a:b", "a*b", "a#b", "a\"b", b"tube", None, 5,
]
TUBE_COMMANDS: list[Any] = [Use, Watch, Ignore, StatsTube, lambda t: PauseTube(t, 0)]


@pytest.mark.parametrize("make", TUBE_COMMANDS)
@pytest.mark.parametrize("tube", BAD_TUBES, ids=repr)
def test_bad_tube_names_refused(make: Any, tube: object) -> None:
    _assert_refused_and_nothing_sent(lambda: make(tube))


@pytest.mark.parametrize("tube", ["a" * 200, "a+b/c;d.e$f_g(h)", "0", "(x)", "$", "_", "a-"])
def test_good_tube_names_accepted(tube: str) -> None:
    assert Use(tube).encode() == b"use " + tube.encode() + b"\r\n"


BAD_U32: list[object] = [-1, 2**32, 2**64, True, False, 1.0, "1", None]
U32_FIELDS: list[Any] = [
    lambda v: Put(b"x", priority=v),
    lambda v: Put(b"x", delay=v),
    lambda v: Put(b"x", ttr=v),
    lambda v: Release(1, priority=v),
    lambda v: Release(1, delay=v),
    lambda v: Bury(1, priority=v),
    lambda v: Kick(v),
    lambda v: ReserveWithTimeout(v),
    lambda v: PauseTube("t", v),
]


@pytest.mark.parametrize("make", U32_FIELDS)
@pytest.mark.parametrize("value", BAD_U32, ids=repr)
def test_bad_u32_refused(make: Any, value: object) -> None:
    _assert_refused_and_nothing_sent(lambda: make(value))


@pytest.mark.parametrize("make", U32_FIELDS)
@pytest.mark.parametrize("value", [0, 2**32 - 1])
def test_u32_bounds_accepted(make: Any, value: int) -> None:
    assert b" %d" % value in make(value).encode()


ID_COMMANDS: list[Any] = [
    Delete, Touch, Peek, KickJob, StatsJob, ReserveJob, lambda i: Release(i), lambda i: Bury(i),
]


@pytest.mark.parametrize("make", ID_COMMANDS)
@pytest.mark.parametrize("value", [-1, 2**64, True, 1.0, "1", None], ids=repr)
def test_bad_job_ids_refused(make: Any, value: object) -> None:
    _assert_refused_and_nothing_sent(lambda: make(value))


@pytest.mark.parametrize("make", ID_COMMANDS)
def test_job_id_is_unsigned_64_bit(make: Any) -> None:
    assert b" 18446744073709551615" in make(2**64 - 1).encode()


@pytest.mark.parametrize(
    "body", ["text", bytearray(b"x"), memoryview(b"x"), None, 1], ids=repr
)
def test_non_bytes_body_refused(body: object) -> None:
    _assert_refused_and_nothing_sent(lambda: Put(body))  # type: ignore[arg-type]


# -- an independent encoder for commands and replies, for the property tests -----------------


def command_bytes(cmd: Command[Any]) -> bytes:
    if isinstance(cmd, Put):
        head = f"put {cmd.priority} {cmd.delay} {cmd.ttr} {len(cmd.body)}\r\n"
        return head.encode() + cmd.body + b"\r\n"
    args: list[object] = []
    for field in ("tube", "job_id", "priority", "delay", "seconds", "bound"):
        if hasattr(cmd, field):
            args.append(getattr(cmd, field))
    return " ".join([cmd.name, *map(str, args)]).encode() + b"\r\n"


def reply_bytes(reply: Reply) -> bytes:
    if isinstance(reply, Inserted):
        return f"INSERTED {reply.job_id}\r\n".encode()
    if isinstance(reply, BuriedReply):
        return b"BURIED\r\n" if reply.job_id is None else f"BURIED {reply.job_id}\r\n".encode()
    if isinstance(reply, Using):
        return f"USING {reply.tube}\r\n".encode()
    if isinstance(reply, Watching):
        return f"WATCHING {reply.count}\r\n".encode()
    if isinstance(reply, Kicked):
        return b"KICKED\r\n" if reply.count is None else f"KICKED {reply.count}\r\n".encode()
    if isinstance(reply, (Reserved, Found)):
        word = "RESERVED" if isinstance(reply, Reserved) else "FOUND"
        return f"{word} {reply.job_id} {len(reply.body)}\r\n".encode() + reply.body + b"\r\n"
    if isinstance(reply, Ok):
        return f"OK {len(reply.data)}\r\n".encode() + reply.data + b"\r\n"
    if isinstance(reply, ErrorReply):
        return reply.code.value.encode() + b"\r\n"
    words = {Deleted: b"DELETED", Released: b"RELEASED", Touched: b"TOUCHED", Paused: b"PAUSED"}
    return words[type(reply)] + b"\r\n"


TUBE_RE = r"[A-Za-z0-9+/;.$_()][A-Za-z0-9\-+/;.$_()]{0,199}"
tubes = st.one_of(
    st.sampled_from(["default", "t-1", "1.10", "a" * 200]),
    st.from_regex(TUBE_RE, fullmatch=True),
)
u32 = st.integers(0, 2**32 - 1)
ids = st.one_of(st.integers(0, 1000), st.integers(0, 2**64 - 1))
counts = st.integers(0, 2**32 - 1)
_body_piece = st.sampled_from([b"\r\n", b"\r", b"\n", b"x", b"\x00", b"\xff", b" ", b"OK 1"])
small_bodies = st.one_of(
    st.binary(max_size=40), st.lists(_body_piece, max_size=16).map(b"".join)
)
large_bodies = st.builds(
    lambda pattern, n: pattern * n, st.sampled_from([b"\r\n", b"ab\r", b"z"]),
    st.integers(20_000, 60_000),
)
NF = st.just(ErrorReply(ErrorCode.NOT_FOUND))
SERVER_TROUBLE = st.sampled_from(
    [ErrorReply(ErrorCode.OUT_OF_MEMORY), ErrorReply(ErrorCode.INTERNAL_ERROR)]
)


def exchanges(bodies: st.SearchStrategy[bytes]) -> st.SearchStrategy[tuple[Command[Any], Reply]]:
    """A command and a well-formed, non-fatal reply it may get."""

    def pair(
        command: st.SearchStrategy[Any], *replies: st.SearchStrategy[Any]
    ) -> st.SearchStrategy[tuple[Command[Any], Reply]]:
        return st.tuples(command, st.one_of(*replies, SERVER_TROUBLE))

    job = st.builds(Reserved, ids, bodies)
    found = st.builds(Found, ids, bodies)
    ok = st.builds(Ok, bodies)
    timing = st.sampled_from(
        [ErrorReply(ErrorCode.DEADLINE_SOON), ErrorReply(ErrorCode.TIMED_OUT)]
    )
    return st.one_of(
        pair(
            st.builds(Put, bodies, u32, u32, u32),
            st.builds(Inserted, ids),
            st.builds(BuriedReply, ids),
            st.sampled_from(
                [ErrorReply(ErrorCode.JOB_TOO_BIG), ErrorReply(ErrorCode.DRAINING)]
            ),
        ),
        pair(st.builds(Use, tubes), st.builds(Using, tubes)),
        pair(st.just(Reserve()), job, timing),
        pair(st.builds(ReserveWithTimeout, u32), job, timing),
        pair(st.builds(ReserveJob, ids), job, NF),
        pair(st.builds(Delete, ids), st.just(DELETED), NF),
        pair(st.builds(Release, ids, u32, u32), st.just(RELEASED), st.just(BuriedReply()), NF),
        pair(st.builds(Bury, ids, u32), st.just(BuriedReply()), NF),
        pair(st.builds(Touch, ids), st.just(TOUCHED), NF),
        pair(st.builds(Watch, tubes), st.builds(Watching, counts)),
        pair(
            st.builds(Ignore, tubes),
            st.builds(Watching, counts),
            st.just(ErrorReply(ErrorCode.NOT_IGNORED)),
        ),
        pair(st.builds(Peek, ids), found, NF),
        pair(st.sampled_from([PeekReady(), PeekDelayed(), PeekBuried()]), found, NF),
        pair(st.builds(Kick, u32), st.builds(Kicked, counts)),
        pair(st.builds(KickJob, ids), st.just(Kicked(None)), NF),
        pair(st.builds(StatsJob, ids), ok, NF),
        pair(st.builds(StatsTube, tubes), ok, NF),
        pair(st.sampled_from([Stats(), ListTubes(), ListTubesWatched()]), ok),
        pair(st.just(ListTubeUsed()), st.builds(Using, tubes)),
        pair(st.builds(PauseTube, tubes, u32), st.just(PAUSED), NF),
    )


def _split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    # Never an empty chunk: receive_data(b"") means EOF.
    points = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


def _run(pairs: list[tuple[Command[Any], Reply]], chunks: list[bytes]) -> list[Any]:
    conn = Connection()
    sent = b"".join(conn.send(command) for command, _ in pairs)
    assert sent == b"".join(command_bytes(command) for command, _ in pairs)
    assert conn.pending == len(pairs)
    events: list[Any] = []
    for chunk in chunks:
        conn.receive_data(chunk)
        events.extend(drain(conn))
    assert conn.pending == 0
    assert conn.next_event() is NEED_DATA
    return events


@given(pairs=st.lists(exchanges(small_bodies), min_size=1, max_size=12), data=st.data())
def test_pipelined_replies_split_anywhere(pairs: list[Any], data: st.DataObject) -> None:
    stream = b"".join(reply_bytes(reply) for _, reply in pairs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=40))
    assert _run(pairs, _split(stream, cuts)) == [reply for _, reply in pairs]


@given(pairs=st.lists(exchanges(small_bodies), min_size=1, max_size=8))
def test_pipelined_replies_one_byte_at_a_time(pairs: list[Any]) -> None:
    stream = b"".join(reply_bytes(reply) for _, reply in pairs)
    chunks = [stream[i : i + 1] for i in range(len(stream))]
    assert _run(pairs, chunks) == [reply for _, reply in pairs]


# Every reply carries a body, most of them 20-180 KB (CRLF-rich), between ordinary exchanges.
body_exchanges = st.one_of(
    st.tuples(st.just(Reserve()), st.builds(Reserved, ids, large_bodies)),
    st.tuples(st.builds(Peek, ids), st.builds(Found, ids, large_bodies)),
    st.tuples(st.just(Stats()), st.builds(Ok, large_bodies)),
)


@fewer_examples(20)  # 20-180 KB of replies per example: 15 in the ci profile, as before it
@given(
    pairs=st.lists(st.one_of(body_exchanges, exchanges(small_bodies)), min_size=1, max_size=5)
    .filter(lambda pairs: any(len(reply_bytes(reply)) > 20_000 for _, reply in pairs)),
    data=st.data(),
)
def test_pipelined_large_bodies_split_anywhere(pairs: list[Any], data: st.DataObject) -> None:
    stream = b"".join(reply_bytes(reply) for _, reply in pairs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20))
    assert _run(pairs, _split(stream, cuts)) == [reply for _, reply in pairs]


@given(pairs=st.lists(exchanges(small_bodies), min_size=2, max_size=12))
def test_next_event_drains_buffered_replies_without_more_data(pairs: list[Any]) -> None:
    conn = Connection()
    for command, _ in pairs:
        conn.send(command)
    conn.receive_data(b"".join(reply_bytes(reply) for _, reply in pairs))
    for i, (_, reply) in enumerate(pairs):
        assert conn.next_event() == reply
        assert conn.pending == len(pairs) - i - 1
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    assert norm(conn.next_event()) == closed(0, False)


def test_a_16_mib_body_in_big_chunks() -> None:
    body = b"\r\n" * (8 * 1024 * 1024)  # 16 MiB of CRLF
    conn = Connection()
    conn.send(Reserve())
    stream = b"RESERVED 7 %d\r\n" % len(body) + body + b"\r\n"
    events = []
    for i in range(0, len(stream), 1 << 20):
        conn.receive_data(stream[i : i + (1 << 20)])
        events.extend(drain(conn))
    assert events == [Reserved(7, body)]


def test_interleaved_send_and_receive_keep_order() -> None:
    conn = Connection()
    conn.send(Put(b"a"))
    conn.send(Put(b"b"))
    conn.receive_data(b"INSERTED 1\r\nINS")
    assert conn.next_event() == Inserted(1)
    assert conn.next_event() is NEED_DATA
    conn.send(Delete(1))
    assert conn.pending == 2
    conn.receive_data(b"ERTED 2\r\nDELETED\r\n")
    assert drain(conn) == [Inserted(2), DELETED]
    assert conn.pending == 0


def test_a_reply_is_checked_against_the_head_of_the_queue() -> None:
    conn = Connection()
    conn.send(Put(b"a"))
    conn.receive_data(b"INSERTED 1\r\n")
    assert conn.next_event() == Inserted(1)
    conn.send(Delete(1))
    conn.receive_data(b"INSERTED 2\r\n")  # a second INSERTED cannot answer the delete
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


def test_replies_are_matched_to_commands_in_fifo_order() -> None:
    conn = Connection()
    conn.send(Put(b"a"))
    conn.send(Delete(1))
    conn.send(Kick(3))
    conn.receive_data(b"INSERTED 1\r\nDELETED\r\nKICKED 3\r\n")
    assert drain(conn) == [Inserted(1), DELETED, Kicked(3)]


# -- strictness: the server broke the protocol ---------------------------------------------------


def _assert_poisoned(conn: Connection) -> None:
    assert conn.state is ConnectionState.ERROR
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    conn.receive_data(b"DELETED\r\n")
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    assert conn.state is ConnectionState.ERROR
    with pytest.raises(LocalProtocolError):
        conn.send(Delete(1))


def _expect_remote_error(
    commands: list[Command[Any]], data: bytes, *, max_body_size: int | None = None
) -> Connection:
    conn = Connection() if max_body_size is None else Connection(max_body_size=max_body_size)
    for command in commands:
        conn.send(command)
    conn.receive_data(data)
    with pytest.raises(RemoteProtocolError):
        drain(conn)
    _assert_poisoned(conn)
    return conn


STRICTNESS_CASES: list[tuple[str, list[Command[Any]], bytes]] = [
    ("reply with nothing pending", [], b"INSERTED 1\r\n"),
    ("error reply with nothing pending", [], b"NOT_FOUND\r\n"),
    ("reply after quit", [Quit()], b"DELETED\r\n"),
    ("RESERVED to a put", [Put(b"x")], b"RESERVED 1 1\r\nx\r\n"),
    ("INSERTED to a delete", [Delete(1)], b"INSERTED 1\r\n"),
    ("NOT_FOUND to a put", [Put(b"x")], b"NOT_FOUND\r\n"),
    ("NOT_FOUND to a use", [Use("t")], b"NOT_FOUND\r\n"),
    ("TIMED_OUT to a peek", [Peek(1)], b"TIMED_OUT\r\n"),
    ("DEADLINE_SOON to reserve-job", [ReserveJob(1)], b"DEADLINE_SOON\r\n"),
    ("FOUND to a reserve", [Reserve()], b"FOUND 1 1\r\nx\r\n"),
    ("OK to a reserve", [Reserve()], b"OK 1\r\nx\r\n"),
    ("USING to a watch", [Watch("t")], b"USING t\r\n"),
    ("unknown word", [Delete(1)], b"FROBNICATED\r\n"),
    ("lower-case word", [Delete(1)], b"deleted\r\n"),
    ("empty line", [Delete(1)], b"\r\n"),
    ("non-ASCII word", [Delete(1)], "DELETÉD\r\n".encode()),
    ("line over 224 bytes", [Delete(1)], b"X" * 225),
    ("long line with CRLF", [Delete(1)], b"NOT_FOUND" + b" " * 214 + b"\r\n"),
    ("bare LF endings", [Delete(1), Delete(2)], b"DELETED\nDELETED\nDELETED\r\n"),
    ("bare CR ending", [Delete(1), Delete(2)], b"DELETED\rDELETED\r\n"),
    ("LF CR ending", [Delete(1), Delete(2)], b"DELETED\n\rDELETED\r\n"),
    ("non-digit id", [Put(b"x")], b"INSERTED x\r\n"),
    ("plus sign", [Put(b"x")], b"INSERTED +1\r\n"),
    ("leading space", [Put(b"x")], b"INSERTED  1\r\n"),
    ("trailing space", [Put(b"x")], b"INSERTED 1 \r\n"),
    ("negative", [Put(b"x")], b"INSERTED -1\r\n"),
    ("underscore", [Put(b"x")], b"INSERTED 1_0\r\n"),
    ("hex", [Put(b"x")], b"INSERTED 0x1\r\n"),
    ("non-ASCII digit", [Put(b"x")], "INSERTED \u0661\r\n".encode()),
    ("missing id", [Put(b"x")], b"INSERTED\r\n"),
    ("empty id", [Put(b"x")], b"INSERTED \r\n"),
    ("21-digit id", [Put(b"x")], b"INSERTED 123456789012345678901\r\n"),
    ("extra argument", [Put(b"x")], b"INSERTED 1 2\r\n"),
    ("float count", [Watch("t")], b"WATCHING 1.5\r\n"),
    ("argument to DELETED", [Delete(1)], b"DELETED 1\r\n"),
    ("argument to NOT_FOUND", [Delete(1)], b"NOT_FOUND x\r\n"),
    ("bad size", [Reserve()], b"RESERVED 1 +1\r\nx\r\n"),
    ("missing size", [Reserve()], b"RESERVED 1\r\n"),
    ("extra size", [Reserve()], b"RESERVED 1 1 1\r\nx\r\n"),
    ("negative OK size", [Stats()], b"OK -1\r\n"),
    ("invalid USING tube", [Use("t")], b"USING -t\r\n"),
    ("USING with a space", [Use("t")], b"USING a b\r\n"),
    ("empty USING", [ListTubeUsed()], b"USING \r\n"),
    ("body not followed by CRLF", [Reserve()], b"RESERVED 1 3\r\nabcXY"),
    ("body followed by LF CR", [Peek(1)], b"FOUND 1 3\r\nabc\n\r"),
    ("body longer than announced", [Stats()], b"OK 2\r\nabc\r\n"),
    ("body shorter than announced", [Stats()], b"OK 4\r\nabc\r\nX"),
]


@pytest.mark.parametrize(
    ("commands", "data"),
    [case[1:] for case in STRICTNESS_CASES],
    ids=[case[0] for case in STRICTNESS_CASES],
)
def test_remote_protocol_errors_poison(commands: list[Command[Any]], data: bytes) -> None:
    _expect_remote_error(commands, data)


def test_line_limit_boundary() -> None:
    conn = Connection()
    conn.send(Delete(1))
    conn.receive_data(b"X" * 222 + b"\r")
    assert conn.next_event() is NEED_DATA  # with its LF this line would be exactly 224 bytes
    conn.receive_data(b"X")
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    _assert_poisoned(conn)


def test_a_224_byte_reply_line_is_allowed() -> None:
    conn = Connection()
    conn.send(Use("t"))
    # "USING " + 216 + CRLF = 224; the tube name is too long for beanstalk but the line is not,
    # so the error is about the tube, raised only after the whole line is in.
    conn.receive_data(b"USING " + b"a" * 216)
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"\r\n")
    with pytest.raises(RemoteProtocolError, match="tube"):
        conn.next_event()


def test_bare_lf_is_not_a_line_ending() -> None:
    conn = Connection()
    conn.send(Delete(1))
    conn.receive_data(b"DELETED\n")
    assert conn.next_event() is NEED_DATA
    assert conn.pending == 1


@pytest.mark.parametrize("word", [b"RESERVED 1", b"FOUND 1"])
def test_body_over_max_body_size_refused_before_buffering(word: bytes) -> None:
    command: Command[Any] = Reserve() if word.startswith(b"RES") else Peek(1)
    conn = Connection(max_body_size=10)
    conn.send(command)
    conn.receive_data(word + b" 11\r\n")  # no body yet: refused on the header alone
    with pytest.raises(RemoteProtocolError, match="max_body_size"):
        conn.next_event()
    _assert_poisoned(conn)


def test_ok_over_max_body_size_refused() -> None:
    _expect_remote_error([Stats()], b"OK 11\r\n", max_body_size=10)


def test_body_of_exactly_max_body_size_accepted() -> None:
    conn = Connection(max_body_size=10)
    conn.send(Reserve())
    conn.send(Stats())
    conn.receive_data(b"RESERVED 3 10\r\n0123456789\r\nOK 10\r\n---\na: 12\n\r\n")
    assert drain(conn) == [Reserved(3, b"0123456789"), Ok(b"---\na: 12\n")]


@pytest.mark.parametrize(
    ("command", "data"),
    [
        (Delete(1), b"DELETED \r\n"),
        (Delete(1), b"NOT_FOUND \r\n"),
        (Bury(1), b"BURIED \r\n"),
        (KickJob(1), b"KICKED \r\n"),
    ],
)
def test_trailing_space_after_a_bare_word_refused(command: Command[Any], data: bytes) -> None:
    _expect_remote_error([command], data)


# -- fatal replies: the stream is out of step --------------------------------------------------


FATAL = [
    (ErrorCode.EXPECTED_CRLF, Put(b"x")),
    (ErrorCode.BAD_FORMAT, Use("x")),
    (ErrorCode.UNKNOWN_COMMAND, Stats()),
]


@pytest.mark.parametrize(("code", "command"), FATAL)
def test_fatal_reply_then_connection_closed(code: ErrorCode, command: Command[Any]) -> None:
    conn = Connection()
    conn.send(command)
    conn.send(Delete(1))
    # whatever follows the fatal reply is not trusted, even a well-formed reply
    conn.receive_data(code.value.encode() + b"\r\nDELETED\r\n")
    event = conn.next_event()
    assert event == ErrorReply(code)
    assert isinstance(event, ErrorReply) and event.fatal
    closed = conn.next_event()
    assert isinstance(closed, ConnectionClosed)
    assert closed.pending == 1
    assert conn.state is ConnectionState.CLOSED
    assert isinstance(conn.next_event(), ConnectionClosed)
    with pytest.raises(LocalProtocolError):
        conn.send(Delete(2))


def test_transcript_exchange_6_expected_crlf_closes() -> None:
    conn = Connection()
    conn.send(Put(b"x", 0, 0, 10))
    conn.receive_data(EXCHANGES[6]["recv"].encode())
    assert conn.next_event() == ErrorReply(ErrorCode.EXPECTED_CRLF)
    assert isinstance(conn.next_event(), ConnectionClosed)
    with pytest.raises(LocalProtocolError):
        conn.send(Put(b"x"))


@pytest.mark.parametrize(("index", "code"), [(24, "UNKNOWN_COMMAND"), (25, "BAD_FORMAT"),
                                             (26, "BAD_FORMAT"), (28, "BAD_FORMAT"),
                                             (29, "BAD_FORMAT")])
def test_transcript_bad_input_replies_close(index: int, code: str) -> None:
    conn = Connection()
    conn.send(ListTubeUsed())
    conn.receive_data(EXCHANGES[index]["recv"].encode())
    assert conn.next_event() == ErrorReply(ErrorCode(code))
    assert isinstance(conn.next_event(), ConnectionClosed)
    with pytest.raises(LocalProtocolError):
        conn.send(ListTubeUsed())


@pytest.mark.parametrize(
    "code",
    [ErrorCode.JOB_TOO_BIG, ErrorCode.DRAINING, ErrorCode.OUT_OF_MEMORY,
     ErrorCode.INTERNAL_ERROR],
)
def test_non_fatal_error_replies_keep_the_connection(code: ErrorCode) -> None:
    conn = Connection()
    conn.send(Put(b"x"))
    conn.receive_data(code.value.encode() + b"\r\n")
    event = conn.next_event()
    assert event == ErrorReply(code)
    assert isinstance(event, ErrorReply) and not event.fatal
    assert conn.state is ConnectionState.OPEN
    assert conn.send(Delete(1)) == b"delete 1\r\n"
    conn.receive_data(b"DELETED\r\n")
    assert conn.next_event() == DELETED


# -- EOF ------------------------------------------------------------------------------------------


def test_eof_with_nothing_pending() -> None:
    conn = Connection()
    conn.receive_data(b"")
    assert norm(conn.next_event()) == closed(0, False)
    assert conn.state is ConnectionState.CLOSED
    assert norm(conn.next_event()) == closed(0, False)
    with pytest.raises(LocalProtocolError):
        conn.send(Stats())


def test_eof_with_commands_pending() -> None:
    conn = Connection()
    for i in range(3):
        conn.send(Delete(i))
    conn.receive_data(b"")
    assert norm(conn.next_event()) == closed(3, False)


def test_eof_after_some_replies() -> None:
    conn = Connection()
    conn.send(Delete(1))
    conn.send(Delete(2))
    conn.receive_data(b"DELETED\r\n")
    conn.receive_data(b"")
    assert conn.next_event() == DELETED
    assert norm(conn.next_event()) == closed(1, False)


@pytest.mark.parametrize(
    "data",
    [b"RESERVED 1 10\r\nabc", b"RESERVED 1 3\r\nabc", b"RESERVED 1 3\r\nabc\r", b"RESER",
     b"RESERVED 1 3\r"],
)
def test_eof_mid_reply_is_partial(data: bytes) -> None:
    conn = Connection()
    conn.send(Reserve())
    conn.send(Delete(1))
    conn.receive_data(data)
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    assert norm(conn.next_event()) == closed(2, True)


def test_data_after_eof_raises_and_is_not_fed() -> None:
    # The rule of every core (h11's too): a socket gives nothing after EOF, so bytes fed then
    # are the caller's mistake, reported where it happened; the connection is unchanged.
    conn = Connection()
    conn.send(Delete(1))
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after EOF"):
        conn.receive_data(b"DELETED\r\n")
    assert norm(conn.next_event()) == closed(1, False)


# -- quit -----------------------------------------------------------------------------------------


def test_quit() -> None:
    conn = Connection()
    assert conn.send(Quit()) == b"quit\r\n"
    assert conn.pending == 0
    assert conn.state is ConnectionState.CLOSING
    with pytest.raises(LocalProtocolError):
        conn.send(Stats())
    with pytest.raises(LocalProtocolError):
        conn.send(Quit())
    assert conn.pending == 0
    conn.receive_data(b"")
    assert norm(conn.next_event()) == closed(0, False)


def test_quit_after_pipelined_commands_still_reads_their_replies() -> None:
    conn = Connection()
    conn.send(Delete(1))
    conn.send(Put(b"x"))
    conn.send(Quit())
    assert conn.pending == 2
    conn.receive_data(b"DELETED\r\nINSERTED 5\r\n")
    conn.receive_data(b"")
    assert drain(conn) == [DELETED, Inserted(5), closed(0, False)]


# -- BURIED and KICKED, with and without an argument ---------------------------------------------


def test_buried_with_id_answers_put() -> None:
    conn = Connection()
    conn.send(Put(b"x"))
    conn.receive_data(b"BURIED 42\r\n")
    assert conn.next_event() == BuriedReply(42)


@pytest.mark.parametrize("command", [Bury(1), Release(1)])
def test_bare_buried_answers_bury_and_release(command: Command[Any]) -> None:
    conn = Connection()
    conn.send(command)
    conn.receive_data(b"BURIED\r\n")
    assert conn.next_event() == BuriedReply(None)


def test_bare_buried_to_put_is_an_error() -> None:
    _expect_remote_error([Put(b"x")], b"BURIED\r\n")


@pytest.mark.parametrize("command", [Bury(1), Release(1)])
def test_buried_with_id_to_bury_or_release_is_an_error(command: Command[Any]) -> None:
    _expect_remote_error([command], b"BURIED 1\r\n")


def test_kicked_count_answers_kick() -> None:
    conn = Connection()
    conn.send(Kick(10))
    conn.send(Kick(10))
    conn.receive_data(b"KICKED 0\r\nKICKED 4294967295\r\n")
    assert drain(conn) == [Kicked(0), Kicked(2**32 - 1)]


def test_bare_kicked_answers_kick_job() -> None:
    conn = Connection()
    conn.send(KickJob(1))
    conn.receive_data(b"KICKED\r\n")
    event = conn.next_event()
    assert event == Kicked(None)
    assert isinstance(event, Kicked) and event.count is None


def test_bare_kicked_to_kick_is_an_error() -> None:
    _expect_remote_error([Kick(1)], b"KICKED\r\n")


def test_kicked_count_to_kick_job_is_an_error() -> None:
    _expect_remote_error([KickJob(1)], b"KICKED 1\r\n")


def test_singletons_compare_equal_to_fresh_replies() -> None:
    assert Deleted() == DELETED
    assert Released() == RELEASED
    assert Touched() == TOUCHED
    assert Paused() == PAUSED
    assert Deleted() != Released()


# -- a read of nothing but INSERTED lines, parsed in one step (Session.receive_data) -----------

_INSERTED_LINES = st.one_of(
    st.integers(0, 10**20 - 1).map(lambda n: b"INSERTED %d\r\n" % n),
    st.from_regex(rb"\AINSERTED 0{1,3}[0-9]{1,5}\r\n\Z"),  # leading zeros: accepted as ever
    st.sampled_from([
        b"INSERTED \r\n", b"INSERTED 1 \r\n", b"INSERTED -1\r\n", b"INSERTED +1\r\n",
        b"INSERTED 1\n", b"INSERTED %s\r\n" % (b"9" * 21), b"INSERTED\r\n",
        b"INSERTED \xd9\xa1\r\n", b"INSERTED 1\r\nINSERTED", b"BURIED 7\r\n",
        b"JOB_TOO_BIG\r\n", b"DELETED\r\n", b"INSERTED 1\r\r\n",
    ]),
)


class _LineByLine(Connection):
    """The core without its one-step read: every reply goes through the line parser."""

    def receive_batch(self, data: bytes) -> None:
        return None


def _outcomes(data: bytes, commands: list[Any], fast: bool) -> tuple[list[Any], str | None]:
    session = Session()
    if not fast:
        session.conn = _LineByLine()
    pendings = [session.submit(command) for command in commands]
    session.data_to_send()
    session.receive_data(data)
    return (
        [(p.done, p.reply, type(p.error).__name__ if p.error else None) for p in pendings],
        None if session.broken is None else type(session.broken).__name__,
    )


@given(
    lines=st.lists(_INSERTED_LINES, min_size=1, max_size=12),
    kinds=st.lists(st.sampled_from(["put", "put", "put", "delete"]), min_size=1, max_size=14),
)
def test_an_inserted_run_is_read_as_the_line_parser_reads_it(
    lines: list[bytes], kinds: list[str]
) -> None:
    """The one-step path and the line-by-line one give every caller the same reply or error,
    and break the connection alike, whatever the read holds (good, odd or hostile lines) and
    whatever commands await it."""
    commands = [Put(b"x") if kind == "put" else Delete(1) for kind in kinds]
    data = b"".join(lines)
    assert _outcomes(data, commands, fast=True) == _outcomes(data, commands, fast=False)


def test_a_read_of_whole_inserted_lines_answering_puts_takes_the_one_step_path() -> None:
    conn = Connection()
    for _ in range(3):
        conn.send(Put(b"x"))
    assert conn.receive_batch(b"INSERTED 7\r\nINSERTED 008\r\nINSERTED 9\r\n") == [
        Inserted(7), Inserted(8), Inserted(9)]
    assert conn.next_event() is NEED_DATA
    conn.send(Put(b"x"))
    conn.send(Delete(1))  # not a put: the line parser decides
    assert conn.receive_batch(b"INSERTED 1\r\nINSERTED 2\r\n") is None
    conn.receive_data(b"INSERTED 1\r\nDELETED\r\n")
    assert conn.next_event() == Inserted(1)


# -- a read of one whole reply, parsed in one step (a call made one at a time) -----------------

_GOOD_REPLIES = [
    *(b"%s\r\n" % code.value.encode() for code in ErrorCode),
    b"DELETED\r\n", b"RELEASED\r\n", b"TOUCHED\r\n", b"PAUSED\r\n", b"BURIED\r\n",
    b"BURIED 5\r\n", b"INSERTED 12\r\n", b"INSERTED 0\r\n", b"RESERVED 3 2\r\nhi\r\n",
    b"RESERVED 3 0\r\n\r\n", b"RESERVED 4 6\r\n\r\n\r\n\r\n", b"RESERVED 4 7\r\n1234567\r\n",
    b"FOUND 3 2\r\nhi\r\n", b"OK 2\r\nhi\r\n", b"USING t\r\n", b"WATCHING 2\r\n",
    b"KICKED 1\r\n", b"KICKED\r\n",
]
_NUMBERS = [b"", b"-1", b"+1", b"007", b"9" * 21, b"1 2", b" 1", b"\xd9\xa1", b"1\r", b"0"]


@st.composite
def _one_reply(draw: st.DrawFn) -> bytes:
    """One reply as a server may send it (half the time), or nearly: a number made odd, a
    stray space or line end, a body shorter or longer than announced, a cut, a second reply
    behind."""
    reply = draw(st.sampled_from(_GOOD_REPLIES))
    change = draw(st.sampled_from(
        ["none", "none", "none", "none", "number", "space", "end", "tail", "body", "cut", "more",
         "lower"]))
    if change == "number" and b" " in reply:
        word, _, rest = reply.partition(b" ")
        number = draw(st.sampled_from(_NUMBERS))
        reply = word + b" " + (number + rest[rest.index(b"\r\n"):] if rest[:1].isdigit()
                               and b" " not in rest.split(b"\r\n")[0] else number + b" " + rest)
    elif change == "space":
        at = reply.index(b"\r\n")
        reply = reply[:at] + b" " + reply[at:]
    elif change == "end":
        reply = reply.replace(b"\r\n", draw(st.sampled_from([b"\n", b"\r", b"\r\r\n"])), 1)
    elif change == "tail":  # the last CRLF (a body's, for a reply with one) made other bytes
        reply = reply[:-2] + b"xx"
    elif change == "body":
        reply = reply[:-2] + draw(st.sampled_from([b"x", b"", b"xy"])) + b"\r\n"
    elif change == "cut":
        reply = reply[:draw(st.integers(1, len(reply) - 1))]
    elif change == "more":
        reply += draw(st.sampled_from([b"INSERTED 1\r\n", b"DEL", b"DELETED\r\n", b"\r\n"]))
    elif change == "lower":
        reply = reply.lower()
    return reply


_HEADS = [
    Put(b"x"), Reserve(), ReserveWithTimeout(0), ReserveJob(1), Delete(1), Release(1),
    Bury(1), Touch(1), Peek(1), StatsJob(1), Use("t"), Watch("t"), Ignore("t"), Kick(1),
    KickJob(1), PauseTube("t", 1), Stats(),
]


def _read_outcomes(
    data: bytes, commands: list[Command[Reply]], fast: bool, before: bytes
) -> tuple[Any, ...]:
    session = Session(max_body_size=6)
    if not fast:
        session.conn = _LineByLine(max_body_size=6)
    pendings = [session.submit(command) for command in commands]
    session.data_to_send()
    if before:
        session.receive_data(before)  # leaves a partial reply buffered, or a body awaited
    session.receive_data(data)
    return (
        [(p.done, p.reply, type(p.error).__name__ if p.error else None) for p in pendings],
        None if session.broken is None else type(session.broken).__name__,
        session.conn.state, session.conn.pending,
    )


@st.composite
def _awaiting(draw: st.DrawFn, data: bytes) -> list[Command[Reply]]:
    """The commands awaiting replies: most often led by one that the read's first word can
    answer (the case the one-step read takes), else any (none included)."""
    word = data.split(b"\r\n")[0].partition(b" ")[0]
    fitting = [command for command in _HEADS if word in command.accepts]
    heads = draw(st.lists(st.sampled_from(_HEADS), max_size=2))
    if fitting and draw(st.integers(0, 3)):
        heads.insert(0, draw(st.sampled_from(fitting)))
    return heads


@given(
    data_heads=_one_reply().flatmap(lambda data: st.tuples(st.just(data), _awaiting(data))),
    before=st.sampled_from([b"", b"", b"DELE", b"RESERVED 1 2\r\n", b"RESERVED 1 2\r\nx"]),
)
# The rarer draws, every run: a body not followed by CRLF, a reply that cannot answer the
# command, replies after one that left the stream out of step.
@example(data_heads=(b"RESERVED 3 2\r\nhixx", [Reserve()]), before=b"")
@example(data_heads=(b"RESERVED 3 2\r\nhi\r\n", [Delete(1)]), before=b"")
@example(data_heads=(b"DELETED\r\n", [Delete(1), Delete(2)]), before=b"BAD_FORMAT\r\n")
def test_one_reply_is_read_as_the_line_parser_reads_it(
    data_heads: tuple[bytes, list[Command[Reply]]], before: bytes
) -> None:
    """The one-step read of a single reply (``INSERTED``, a bare word, ``RESERVED`` and its
    body) and the line-by-line parse give every caller the same reply or error and break the
    connection (and its core) alike, whatever the read holds and whatever commands await it
    (none included), with nothing buffered before it or with part of a reply buffered."""
    data, heads = data_heads
    commands = [Reserve(), *heads] if before.startswith(b"RESERVED") else heads
    assert _read_outcomes(data, commands, True, before) == _read_outcomes(
        data, commands, False, before)


def test_a_read_of_one_reply_takes_the_one_step_path() -> None:
    conn = Connection()
    conn.send(Put(b"x"))
    assert conn.receive_batch(b"INSERTED 17\r\n") == [Inserted(17)]
    conn.send(Reserve())
    assert conn.receive_batch(b"RESERVED 3 2\r\nhi\r\n") == [Reserved(3, b"hi")]
    conn.send(Delete(3))
    assert conn.receive_batch(b"NOT_FOUND\r\n") == [ErrorReply(ErrorCode.NOT_FOUND)]
    conn.send(Delete(3))
    assert conn.receive_batch(b"DELETED\r\n") == [DELETED]
    assert conn.next_event() is NEED_DATA
    conn.send(Delete(3))
    # A reply that puts the stream out of step, or that cannot answer the command: the line
    # parser decides (and raises).
    assert conn.receive_batch(b"BAD_FORMAT\r\n") is None
    assert conn.receive_batch(b"INSERTED 1\r\n") is None
    conn.receive_data(b"")  # the end of the stream: what comes after is the parser's error
    assert conn.receive_batch(b"DELETED\r\n") is None


# -- a read of several RESERVED and one-word replies, parsed in one step (a worker's reads) ----

_RUN_REPLIES = [
    b"RESERVED 3 2\r\nhi\r\n", b"RESERVED 3 0\r\n\r\n", b"RESERVED 4 6\r\n\r\n\r\n\r\n",
    b"RESERVED 0012 5\r\nRESER\r\n", b"DELETED\r\n", b"TIMED_OUT\r\n", b"DEADLINE_SOON\r\n",
    b"NOT_FOUND\r\n", b"RELEASED\r\n", b"TOUCHED\r\n",
]
#: Replies a run leaves to the line parser (a body over max_body_size=6, a word it does not
#: take, one that leaves the stream out of step).
_NOT_IN_RUNS = [
    b"RESERVED 5 7\r\n1234567\r\n", b"BURIED\r\n", b"INSERTED 1\r\n", b"FOUND 3 2\r\nhi\r\n",
    b"BAD_FORMAT\r\n", b"OUT_OF_MEMORY\r\n",
]


@st.composite
def _reply_runs(draw: st.DrawFn) -> tuple[bytes, list[Command[Reply]]]:
    """Replies as a worker reads them (most often whole RESERVED and one-word replies, each
    fitting the command it answers), or nearly: one of them made odd (``_one_reply``'s
    changes), a command that the reply cannot answer, too few or too many commands."""
    good = st.sampled_from(_RUN_REPLIES)
    odd = st.one_of(st.sampled_from(_NOT_IN_RUNS), _one_reply())
    replies = draw(st.lists(good, min_size=2, max_size=8))
    if draw(st.integers(0, 2)) == 0:
        replies.insert(draw(st.integers(0, len(replies))), draw(odd))
    commands: list[Command[Reply]] = []
    for reply in replies:
        word = reply.split(b"\r\n")[0].partition(b" ")[0]
        fitting = [command for command in _HEADS if word in command.accepts]
        if fitting and draw(st.integers(0, 7)):
            commands.append(draw(st.sampled_from(fitting)))
        else:
            commands.append(draw(st.sampled_from(_HEADS)))
    cut = draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, -1]))
    if cut > 0:
        commands.append(draw(st.sampled_from(_HEADS)))
    elif cut < 0:
        commands.pop()
    return b"".join(replies), commands


@given(
    data_commands=_reply_runs(),
    before=st.sampled_from([b"", b"", b"", b"", b"", b"DELE", b"RESERVED 1 2\r\nx"]),
)
@example(data_commands=(b"RESERVED 3 2\r\nhi\r\nDELETED\r\n", [Reserve(), Delete(3)]),
         before=b"")
@example(data_commands=(b"DELETED\r\nRESERVED 3 2\r\nhi\r\n", [Delete(3), Reserve()]),
         before=b"")
@example(data_commands=(b"RESERVED 3 9\r\nhi\r\nDELETED\r\n", [Reserve(), Delete(3)]),
         before=b"")
@example(data_commands=(b"RESERVED 3 2\r\nhixxDELETED\r\n", [Reserve(), Delete(3)]),
         before=b"")
@example(data_commands=(b"DELETED\r\nRESERVED 4 2\r\nho\r\n", [Delete(3), Delete(4)]),
         before=b"")
@example(data_commands=(b"DELETED\r\nDELETED\r\n", [Delete(3), Reserve()]), before=b"")
@example(data_commands=(b"RESERVED 5 7\r\n1234567\r\nDELETED\r\n", [Reserve(), Delete(3)]),
         before=b"")
def test_a_run_of_reserved_and_bare_replies_is_read_as_the_line_parser_reads_it(
    data_commands: tuple[bytes, list[Command[Reply]]], before: bytes
) -> None:
    """The one-step read of several replies (``RESERVED`` with its body, one-word replies)
    and the line-by-line parse give every caller the same reply or error and leave the
    connection (and its core) alike, whatever the read holds and whatever commands await
    it."""
    data, commands = data_commands
    if before.startswith(b"RESERVED"):
        commands = [Reserve(), *commands]
    assert _read_outcomes(data, commands, True, before) == _read_outcomes(
        data, commands, False, before)


def test_a_run_of_reserves_and_deletes_takes_the_one_step_path() -> None:
    conn = Connection()
    for command in (ReserveWithTimeout(0), Delete(3), ReserveWithTimeout(0), Delete(4)):
        conn.send(command)
    assert conn.receive_batch(
        b"RESERVED 5 2\r\nhi\r\nDELETED\r\nTIMED_OUT\r\nNOT_FOUND\r\n"
    ) == [Reserved(5, b"hi"), DELETED, ErrorReply(ErrorCode.TIMED_OUT),
          ErrorReply(ErrorCode.NOT_FOUND)]
    assert conn.pending == 0
    assert conn.next_event() is NEED_DATA
    conn.send(ReserveWithTimeout(0))
    conn.send(Delete(5))
    # A reply the command cannot answer, or a body cut short: the line parser decides.
    assert conn.receive_batch(b"DELETED\r\nRESERVED 5 2\r\nhi\r\n") is None
    assert conn.receive_batch(b"RESERVED 5 2\r\nhi\r\nDELE") is None
    assert conn.pending == 2
