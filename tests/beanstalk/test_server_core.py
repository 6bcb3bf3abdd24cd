"""The server-role Sans-IO core: client bytes in, commands (or BadRequest) out."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from beanstalk_client._commands import (
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
from beanstalk_client._events import NEED_DATA, ConnectionClosed, Inserted
from beanstalk_client._server_protocol import BadRequest, ServerConnection
from tests.conftest import BEANSTALKD_TRANSCRIPT

TRANSCRIPT = BEANSTALKD_TRANSCRIPT

with TRANSCRIPT.open(encoding="utf-8") as _f:
    EXCHANGES = [json.loads(line) for line in _f if line.strip()]


def bad(code: str) -> tuple[str, str]:
    return ("bad", code)


def norm(event: Any) -> Any:
    """BadRequest compares by code (its detail is free text); ConnectionClosed by partial."""
    if isinstance(event, BadRequest):
        return bad(event.code.value)
    if isinstance(event, ConnectionClosed):
        return ("closed", event.partial)
    return event


def drain(server: ServerConnection) -> list[Any]:
    events: list[Any] = []
    for _ in range(100_000):
        event = server.next_event()
        if event is NEED_DATA:
            return events
        events.append(norm(event))
        if isinstance(event, ConnectionClosed):
            return events
    raise AssertionError("next_event never returned NEED_DATA")


A200 = "a" * 200

# What the server core makes of each transcript `send`, in order, on one connection.
EXPECTED: list[list[Any]] = [
    [Put(b"hello", 0, 0, 60)],
    [Use("t-1")],
    [Put(b"abc", 100, 0, 60), Put(b"def", 5, 2, 60)],
    [Put(b"\r\n\r\n", 0, 0, 60)],
    [Put(b"", 0, 0, 60)],
    [Put(b"x", 0, 0, 0)],
    [bad("EXPECTED_CRLF"), bad("UNKNOWN_COMMAND")],
    [Watch("t-1"), Ignore("default"), Ignore("t-1")],
    [ListTubesWatched(), ListTubeUsed()],
    [ReserveWithTimeout(0)],
    [StatsJob(2), StatsJob(4)],
    [ReserveWithTimeout(0), Touch(5), Release(5, 9, 3), StatsJob(5)],
    [Use("t-1"), Peek(2), PeekReady(), PeekDelayed(), PeekBuried()],
    [StatsTube("t-1"), StatsTube("nope")],
    [ListTubes()],
    [PauseTube("t-1", 0), PauseTube("nope", 1)],
    [Delete(999999)],
    [Use("empty-t"), Kick(10)],
    [KickJob(999999)],
    [ReserveJob(1)],
    [Bury(1, 7), KickJob(1)],
    [Release(999999, 0, 0)],
    [Touch(999999)],
    [Ignore("default")],
    [bad("UNKNOWN_COMMAND")],
    [bad("BAD_FORMAT"), bad("UNKNOWN_COMMAND")],
    [bad("BAD_FORMAT")],
    [Use(A200)],
    [bad("BAD_FORMAT")],
    [bad("BAD_FORMAT"), ListTubeUsed()],
    [Use("a+b/c;d.e$f_g(h)")],
    [bad("JOB_TOO_BIG"), ListTubeUsed()],
    [Put(b"z" * 1024, 0, 0, 60)],
    [Stats()],
    [Use("ds"), Watch("ds"), Ignore("default"), Put(b"q", 0, 0, 2), Reserve()],
    [Reserve(), Delete(9)],
    [Quit()],
]

ERROR_WORDS = {"EXPECTED_CRLF", "UNKNOWN_COMMAND", "BAD_FORMAT", "JOB_TOO_BIG"}


def _stream() -> bytes:
    return b"".join(exchange["send"].encode("latin-1") for exchange in EXCHANGES)


def test_expected_table_matches_the_transcript() -> None:
    assert len(EXPECTED) == len(EXCHANGES)
    for exchange, expected in zip(EXCHANGES, EXPECTED, strict=True):
        # the error replies beanstalkd sent are exactly our BadRequest codes, in order
        recv_errors = [
            line for line in exchange["recv"].split("\r\n") if line in ERROR_WORDS
        ]
        assert recv_errors == [e[1] for e in expected if isinstance(e, tuple)]


def test_transcript_exchange_by_exchange() -> None:
    server = ServerConnection(max_job_size=1024)
    for index, exchange in enumerate(EXCHANGES):
        server.receive_data(exchange["send"].encode("latin-1"))
        assert drain(server) == EXPECTED[index], f"exchange {index}: {exchange['note']}"
    server.receive_data(b"")
    assert server.eof
    assert drain(server) == [("closed", False)]


def test_transcript_all_at_once() -> None:
    server = ServerConnection(max_job_size=1024)
    server.receive_data(_stream())
    assert drain(server) == [event for events in EXPECTED for event in events]


def _split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


def _feed(chunks: Iterable[bytes], **kwargs: Any) -> list[Any]:
    server = ServerConnection(**kwargs)
    events: list[Any] = []
    for chunk in chunks:
        server.receive_data(chunk)
        events.extend(drain(server))
    return events


@given(data=st.data())
def test_transcript_split_anywhere(data: st.DataObject) -> None:
    stream = _stream()
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=60))
    expected = [event for events in EXPECTED for event in events]
    assert _feed(_split(stream, cuts), max_job_size=1024) == expected


def test_transcript_one_byte_at_a_time() -> None:
    stream = _stream()
    expected = [event for events in EXPECTED for event in events]
    assert _feed((stream[i : i + 1] for i in range(len(stream))), max_job_size=1024) == expected


# -- the desync cases, one by one -------------------------------------------------------------


def test_size_mismatch_expected_crlf_then_rest_read_as_a_command() -> None:
    server = ServerConnection()
    server.receive_data(b"put 0 0 10 1\r\nxyz\r\nstats\r\n")
    assert drain(server) == [bad("EXPECTED_CRLF"), bad("UNKNOWN_COMMAND"), Stats()]


def test_expected_crlf_consumes_size_plus_two_bytes() -> None:
    server = ServerConnection()
    server.receive_data(b"put 0 0 10 3\r\nabcdestats\r\n")  # "de" stands where CRLF should be
    assert drain(server) == [bad("EXPECTED_CRLF"), Stats()]


def test_bad_number_then_body_read_as_a_command() -> None:
    server = ServerConnection()
    server.receive_data(b"put x 0 60 1\r\na\r\nlist-tubes\r\n")
    assert drain(server) == [bad("BAD_FORMAT"), bad("UNKNOWN_COMMAND"), ListTubes()]


@pytest.mark.parametrize(
    "line",
    [b"put 4294967296 0 60 1", b"put 0 4294967296 60 1", b"put 0 0 4294967296 1"],
)
def test_u32_overflow_in_put_is_bad_format_before_the_body(line: bytes) -> None:
    server = ServerConnection()
    server.receive_data(line + b"\r\nx\r\nlist-tubes\r\n")
    assert drain(server) == [bad("BAD_FORMAT"), bad("UNKNOWN_COMMAND"), ListTubes()]


def test_over_long_line_one_bad_format_then_resync() -> None:
    server = ServerConnection()
    server.receive_data(b"x" * 1000 + b"\r\nstats\r\n")
    assert drain(server) == [bad("BAD_FORMAT"), Stats()]


def test_over_long_line_in_pieces() -> None:
    server = ServerConnection()
    events = []
    for _ in range(50):
        server.receive_data(b"y" * 100)
        events.extend(drain(server))
    assert events == []  # nothing until the line ends ...
    server.receive_data(b"\r")
    assert drain(server) == []
    server.receive_data(b"\nstats\r\n")
    assert drain(server) == [bad("BAD_FORMAT"), Stats()]  # ... then exactly one BAD_FORMAT


def test_line_length_boundary() -> None:
    # 222 bytes + CRLF = 224: a (bad) command, parsed as a line; 223 + CRLF: too long.
    server = ServerConnection()
    server.receive_data(b"use " + b"a" * 218 + b"\r\n")
    assert drain(server) == [bad("BAD_FORMAT")]  # 218-byte name: bad, but a whole line
    server.receive_data(b"pause-tube " + b"b" * 200 + b" 4294967295\r\n")  # exactly 224
    assert drain(server) == [PauseTube("b" * 200, 2**32 - 1)]


def test_crlf_straddling_the_224_byte_buffer_swallows_the_next_line() -> None:
    # beanstalkd throws away its full 224-byte buffer, the CR in its last byte with it: the LF
    # then starts the next buffer, and the next CRLF (after "stats") ends the over-long line.
    server = ServerConnection()
    server.receive_data(b"use " + b"a" * 219 + b"\r\nstats\r\nlist-tubes\r\n")
    assert drain(server) == [bad("BAD_FORMAT"), ListTubes()]


@pytest.mark.parametrize(
    ("length", "swallowed"),
    [(446, False), (447, True), (448, False), (670, False), (671, True), (672, False)],
)
def test_over_long_line_is_thrown_away_224_bytes_at_a_time(length: int, swallowed: bool) -> None:
    # The CR at offset length in a buffer of its own: lost when it is a buffer's last byte.
    server = ServerConnection()
    events = []
    for piece in (b"x" * length, b"\r\nstats\r\nlist-tubes\r\n"):  # pieces do not matter
        server.receive_data(piece)
        events += drain(server)
    assert events == [bad("BAD_FORMAT")] + ([] if swallowed else [Stats()]) + [ListTubes()]


def test_first_cr_without_lf_ends_no_line() -> None:
    # beanstalkd looks only at the first CR of its buffer: with no LF after it, a later CRLF
    # ends nothing, and the line runs on until 224 bytes have come.
    server = ServerConnection()
    server.receive_data(b"use a\rb\r\nstats\r\n")
    assert drain(server) == []
    server.receive_data(b"s" * (224 - 16))  # the buffer is full: thrown away
    assert drain(server) == []
    server.receive_data(b"\r\nlist-tubes\r\n")
    assert drain(server) == [bad("BAD_FORMAT"), ListTubes()]


def test_job_too_big_discards_the_body() -> None:
    server = ServerConnection(max_job_size=4)
    server.receive_data(b"put 0 0 60 5\r\nstats\r\nlist-tubes\r\n")
    assert drain(server) == [bad("JOB_TOO_BIG"), ListTubes()]


def test_job_too_big_body_in_pieces() -> None:
    server = ServerConnection(max_job_size=10)
    server.receive_data(b"put 0 0 60 100\r\n")
    assert drain(server) == [bad("JOB_TOO_BIG")]
    for _ in range(10):
        server.receive_data(b"use xy\r\n\r\n")  # 10 bytes that look like commands
        assert drain(server) == []
    server.receive_data(b"\r\nstats\r\n")
    assert drain(server) == [Stats()]


def test_exact_max_job_size_accepted() -> None:
    server = ServerConnection(max_job_size=4)
    server.receive_data(b"put 1 2 3 4\r\n\r\n\r\n\r\n")
    assert drain(server) == [Put(b"\r\n\r\n", 1, 2, 3)]


def test_default_max_job_size_is_65535() -> None:
    server = ServerConnection()
    body = b"b" * 65535
    server.receive_data(b"put 0 0 1 65535\r\n" + body + b"\r\nput 0 0 1 65536\r\n")
    assert drain(server) == [Put(body, 0, 0, 1), bad("JOB_TOO_BIG")]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"", "UNKNOWN_COMMAND"),
        (b"frobnicate", "UNKNOWN_COMMAND"),
        (b"PUT 0 0 0 0", "UNKNOWN_COMMAND"),
        (b"\xff\xfe", "UNKNOWN_COMMAND"),
        (b" stats", "UNKNOWN_COMMAND"),
        (b"stats ", "BAD_FORMAT"),
        (b"stats x", "BAD_FORMAT"),
        (b"reserve 1", "BAD_FORMAT"),
        (b"use", "UNKNOWN_COMMAND"),  # beanstalkd matches "use " with its space
        (b"kick", "UNKNOWN_COMMAND"),
        (b"stats-job", "BAD_FORMAT"),  # matches the prefix "stats", then malformed
        (b"use ", "BAD_FORMAT"),
        (b"use a b", "BAD_FORMAT"),
        (b"use  a", "BAD_FORMAT"),
        (b"use -abc", "BAD_FORMAT"),
        (b"use " + b"a" * 201, "BAD_FORMAT"),
        (b"use a\x00b", "BAD_FORMAT"),
        (b"use t\xc3\xbcbe", "BAD_FORMAT"),
        (b"use a\nb", "BAD_FORMAT"),
        (b"reservex", "BAD_FORMAT"),  # a "reserve" with trailing garbage
        (b"statsx", "BAD_FORMAT"),
        (b"list-tube-usedx", "BAD_FORMAT"),
        (b"list-tube-used ", "BAD_FORMAT"),
        (b"reserve-with-timeoutx 0", "BAD_FORMAT"),
        (b"kick abc", "BAD_FORMAT"),  # strtoul read no digits
        (b"kick ", "BAD_FORMAT"),
        (b"kick +", "BAD_FORMAT"),
        (b"delete -1", "BAD_FORMAT"),
        (b"delete +1", "BAD_FORMAT"),
        (b"delete 1.0", "BAD_FORMAT"),
        (b"delete 18446744073709551616", "BAD_FORMAT"),
        (b"kick 99999999999999999999999", "BAD_FORMAT"),  # past 2**64-1
        (b"release 1 2", "BAD_FORMAT"),
        (b"bury 1 4294967296", "BAD_FORMAT"),
        (b"pause-tube t", "BAD_FORMAT"),
        (b"pause-tube -t 1", "BAD_FORMAT"),
        (b"reserve-with-timeout", "BAD_FORMAT"),  # a "reserve" with trailing garbage
        (b"reserve-with-timeout 9223372036854775808", "BAD_FORMAT"),  # strtol: ERANGE
        (b"reserve-with-timeout -9223372036854775809", "BAD_FORMAT"),
        (b"reserve-with-timeout 0\x00", "BAD_FORMAT"),
        (b"delete 1abc", "BAD_FORMAT"),
        (b"delete 1 ", "BAD_FORMAT"),
        (b"put 0 0 60 1abc", "BAD_FORMAT"),
        (b"put 0 0 60", "BAD_FORMAT"),
        (b"put 0 0 60 -1", "BAD_FORMAT"),
        (b"put 0 0 60 1 2", "BAD_FORMAT"),
    ],
)
def test_bad_lines(line: bytes, expected: str) -> None:
    server = ServerConnection()
    server.receive_data(line + b"\r\nstats\r\n")
    assert drain(server) == [bad(expected), Stats()]


@pytest.mark.parametrize(
    ("line", "command"),
    [
        (b"reserve-with-timeout -1", ReserveWithTimeout(2**32 - 1)),  # 1.12 blocks
        # strtol: white space and a sign first, no digits read as 0, anything after ignored;
        # then cut to a C int (negative blocks like reserve).
        (b"reserve-with-timeout abc", ReserveWithTimeout(0)),
        (b"reserve-with-timeout ", ReserveWithTimeout(0)),
        (b"reserve-with-timeout 0x10", ReserveWithTimeout(0)),
        (b"reserve-with-timeout +0", ReserveWithTimeout(0)),
        (b"reserve-with-timeout  0", ReserveWithTimeout(0)),
        (b"reserve-with-timeout -", ReserveWithTimeout(0)),
        (b"reserve-with-timeout 1abc", ReserveWithTimeout(1)),
        (b"reserve-with-timeout 2 ", ReserveWithTimeout(2)),
        (b"reserve-with-timeout \t\x0b+3", ReserveWithTimeout(3)),
        (b"reserve-with-timeout 4294967296", ReserveWithTimeout(0)),
        (b"reserve-with-timeout 4294967297", ReserveWithTimeout(1)),
        (b"reserve-with-timeout -4294967295", ReserveWithTimeout(1)),
        (b"reserve-with-timeout 2147483647", ReserveWithTimeout(2**31 - 1)),
        (b"reserve-with-timeout 2147483648", ReserveWithTimeout(2**32 - 1)),
        (b"reserve-with-timeout 9223372036854775807", ReserveWithTimeout(2**32 - 1)),
        (b"reserve-with-timeout -9223372036854775808", ReserveWithTimeout(0)),
        (b"kick -1", Kick(2**32 - 1)),  # strtoul: -1 is 2**64-1, low 32 bits kept
        (b"kick 4294967296", Kick(0)),
        (b"kick 1abc", Kick(1)),
        (b"kick  +1", Kick(1)),
        (b"kick 0x10", Kick(0)),
        (b"delete  1", Delete(1)),  # read_u64 skips spaces
        (b"release  1  2  3", Release(1, 2, 3)),
        (b"pause-tube  a  3", PauseTube("a", 3)),
        (b"quit ", Quit()),  # beanstalkd closes on anything starting with quit
        (b"quitx", Quit()),
        (b"reserve-with-timeout 0", ReserveWithTimeout(0)),
        (b"reserve-with-timeout 4294967295", ReserveWithTimeout(2**32 - 1)),
        (b"delete 18446744073709551615", Delete(2**64 - 1)),
        (b"delete 007", Delete(7)),
        (b"quit", Quit()),
        (b"pause-tube a+b 3", PauseTube("a+b", 3)),
        (b"release 1 2 3", Release(1, 2, 3)),
        (b"bury 1 2", Bury(1, 2)),
    ],
)
def test_good_lines(line: bytes, command: Command[Any]) -> None:
    server = ServerConnection()
    server.receive_data(line + b"\r\n")
    assert drain(server) == [command]


def test_bare_lf_is_not_a_line_ending() -> None:
    server = ServerConnection()
    server.receive_data(b"stats\nlist-tubes\n")
    assert drain(server) == []
    server.receive_data(b"\r\n")
    assert drain(server) == [bad("BAD_FORMAT")]  # "stats" with trailing garbage


def test_eof() -> None:
    server = ServerConnection()
    server.receive_data(b"stats\r\nlist-")
    server.receive_data(b"")
    assert server.eof
    assert drain(server) == [Stats(), ("closed", True)]
    assert norm(server.next_event()) == ("closed", True)


def test_eof_mid_body() -> None:
    server = ServerConnection()
    server.receive_data(b"put 0 0 1 10\r\nabc")
    assert drain(server) == []
    server.receive_data(b"")
    assert drain(server) == [("closed", True)]


def test_eof_clean() -> None:
    server = ServerConnection()
    server.receive_data(b"stats\r\n")
    server.receive_data(b"")
    assert drain(server) == [Stats(), ("closed", False)]


def test_send_encodes_replies() -> None:
    server = ServerConnection()
    assert server.send(Inserted(3)) == b"INSERTED 3\r\n"


# -- properties ---------------------------------------------------------------------------------


TUBE_RE = r"[A-Za-z0-9+/;.$_()][A-Za-z0-9\-+/;.$_()]{0,199}"
tubes = st.one_of(
    st.sampled_from(["default", "1.10", "a" * 200]), st.from_regex(TUBE_RE, fullmatch=True)
)
u32 = st.integers(0, 2**32 - 1)
ids = st.one_of(st.integers(0, 1000), st.integers(0, 2**64 - 1))
bodies = st.one_of(
    st.binary(max_size=40),
    st.lists(st.sampled_from([b"\r\n", b"\r", b"\n", b"put 0 0 0 1", b"x", b" "]), max_size=12).map(
        b"".join
    ),
)
commands: st.SearchStrategy[Command[Any]] = st.one_of(
    st.builds(Put, bodies, u32, u32, u32),
    st.builds(Use, tubes),
    st.builds(Watch, tubes),
    st.builds(Ignore, tubes),
    st.builds(StatsTube, tubes),
    st.builds(PauseTube, tubes, u32),
    # beanstalkd keeps the timeout in a C int: 2**31 and up read as negative (wait forever),
    # so only 0..2**31-1 round-trips as itself (the wrap is tested with the raw lines above)
    st.builds(ReserveWithTimeout, st.integers(0, 2**31 - 1)),
    st.builds(Kick, u32),
    st.builds(Release, ids, u32, u32),
    st.builds(Bury, ids, u32),
    st.builds(Delete, ids),
    st.builds(Touch, ids),
    st.builds(Peek, ids),
    st.builds(KickJob, ids),
    st.builds(StatsJob, ids),
    st.builds(ReserveJob, ids),
    st.sampled_from(
        [Reserve(), PeekReady(), PeekDelayed(), PeekBuried(), Stats(), ListTubes(),
         ListTubeUsed(), ListTubesWatched(), Quit()]
    ),
)


@given(commands)
def test_round_trip(command: Command[Any]) -> None:
    server = ServerConnection()
    server.receive_data(command.encode())
    event = server.next_event()
    assert event == command
    assert type(event) is type(command)
    assert server.next_event() is NEED_DATA


@given(cmds=st.lists(commands, min_size=1, max_size=15), data=st.data())
def test_command_stream_split_anywhere(cmds: list[Command[Any]], data: st.DataObject) -> None:
    stream = b"".join(command.encode() for command in cmds)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=40))
    assert _feed(_split(stream, cuts)) == cmds


@given(cmds=st.lists(commands, min_size=1, max_size=6))
def test_command_stream_one_byte_at_a_time(cmds: list[Command[Any]]) -> None:
    stream = b"".join(command.encode() for command in cmds)
    assert _feed(stream[i : i + 1] for i in range(len(stream))) == cmds


_base_tokens = [
    b"\r\n", b"\r", b"\n", b" ", b"\x00", b"\xff", b"-", b"0", b"4294967296", b"use ",
    b"reserve", b"reserve-with-timeout -", b"delete 99999999999999999999999", b"stats",
    b"x" * 230,
]
_put_tokens = [b"put 0 0 0 ", b"put 0 0 0 3\r\n", b"put 1 1 1 99999\r\n", b"put 0 0 0 0\r\n"]


def _junk(tokens: list[bytes]) -> st.SearchStrategy[bytes]:
    pieces = st.one_of(st.binary(max_size=30), st.sampled_from(tokens))
    return st.lists(pieces, max_size=30).map(b"".join)


garbage_with_puts = _junk(_base_tokens + _put_tokens)
# Random bytes spell "put" only rarely; the filter drops those few.
garbage = _junk(_base_tokens).filter(lambda g: b"put" not in g)


def _check_events(events: list[Any]) -> None:
    for event in events:
        assert isinstance(event, (tuple, Command)), event
        if isinstance(event, tuple):
            assert event[0] in ("bad", "closed")


@given(junk=garbage_with_puts, data=st.data())
def test_garbage_never_raises(junk: bytes, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(junk)), max_size=10))
    server = ServerConnection(max_job_size=64)
    events: list[Any] = []
    for chunk in _split(junk, cuts):
        server.receive_data(chunk)
        events.extend(drain(server))
    server.receive_data(b"")
    events.extend(drain(server))
    _check_events(events)
    assert events[-1][0] == "closed"


@given(junk=garbage, data=st.data())
def test_valid_command_after_crlf_still_parsed(junk: bytes, data: st.DataObject) -> None:
    # With no put in the garbage nothing can be mid-body, so a CRLF resyncs: unless a CR
    # without its LF comes first (beanstalkd looks at the first CR only), or the CRLF's CR is
    # the last byte of a 224-byte buffer thrown away (both tested above).
    junk = junk.replace(b"\r", b"")
    assume(len(junk) % 224 != 223)
    stream = junk + b"\r\nlist-tube-used\r\n"
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10))
    events = _feed(_split(stream, cuts))
    _check_events(events)
    assert events[-1] == ListTubeUsed()


# -- the common put and the general path agree ------------------------------------------------

#: Put lines in the common form (read in one step) and in the forms only the general path reads,
#: each with what beanstalkd makes of it.
PUT_FORMS: list[tuple[bytes, list[Any]]] = [
    (b"put 1 0 10 3\r\nabc\r\n", [Put(b"abc", 1, 0, 10)]),
    (b"put 01 002 0003 3\r\nabc\r\n", [Put(b"abc", 1, 2, 3)]),
    (b"put  5  0  10  3\r\nabc\r\n", [Put(b"abc", 5, 0, 10)]),
    (b"put 4294967295 4294967295 4294967295 0\r\n\r\n", [Put(b"", *[2**32 - 1] * 3)]),
    (b"put 4294967296 0 10 1\r\nx\r\n", [bad("BAD_FORMAT"), bad("UNKNOWN_COMMAND")]),
    (b"put 1 0 10 5\r\nab\r\nc\r\n", [Put(b"ab\r\nc", 1, 0, 10)]),
    (b"put 1 0 10 3 \r\nabc\r\n", [bad("BAD_FORMAT"), bad("UNKNOWN_COMMAND")]),
    (b"put 1 0 10 9\r\nabcdefghi\r\n", [bad("JOB_TOO_BIG")]),
    (b"put 1 0 10 8\r\nabcdefgh\r\n", [Put(b"abcdefgh", 1, 0, 10)]),
    (b"put 7 0 0 1\r\n\0\r\n", [Put(b"\0", 7, 0, 0)]),
    (b"put 2 0 10 2\r\nabc\r\nuse a\r\n", [bad("EXPECTED_CRLF"), bad("UNKNOWN_COMMAND")]),
    (b"put 99999999999 0 0 1\r\nx\r\n", [bad("BAD_FORMAT"), bad("UNKNOWN_COMMAND")]),
]


@pytest.mark.parametrize(("data", "expected"), PUT_FORMS)
def test_put_forms_read_as_beanstalkd_reads_them_at_every_split(
    data: bytes, expected: list[Any]
) -> None:
    # tests/beanstalk/test_server.py sends the same lines to beanstalkd itself.
    for cut in range(len(data) + 1):
        server = ServerConnection(max_job_size=8)
        events: list[Any] = []
        for piece in (data[:cut], data[cut:]):
            if piece:
                server.receive_data(piece)
                events += drain(server)
        assert events == expected, cut
        assert [type(e) for e in events] == [type(e) for e in expected]  # Put itself
        assert server.buffered == 0 and not server.partial


_FIELD = st.sampled_from([0, 1, 10, 100, 2**32 - 1])


@given(st.lists(st.tuples(_FIELD, _FIELD, _FIELD, st.binary(max_size=8)), min_size=1,
                max_size=20))
def test_common_puts_in_a_row_are_each_read_with_their_own_fields(
    puts: list[tuple[int, int, int, bytes]],
) -> None:
    # The core remembers the last common put's "<pri> <delay> <ttr>" to skip parsing the
    # same numbers again: puts that repeat them and puts that change any one must all be
    # read as sent.
    server = ServerConnection(max_job_size=8)
    server.receive_data(b"".join(
        b"put %d %d %d %d\r\n%b\r\n" % (pri, delay, ttr, len(body), body)
        for pri, delay, ttr, body in puts))
    assert drain(server) == [Put(body, pri, delay, ttr) for pri, delay, ttr, body in puts]


def test_a_body_over_many_reads_is_held_until_it_is_complete() -> None:
    server = ServerConnection(max_job_size=1 << 20)
    body = bytes(range(256)) * 1200  # 300 KiB
    line = b"put 3 0 60 %d\r\n" % len(body)
    data = line + body + b"\r\nput 0 0 1 1\r\nz\r\n"
    fed = 0
    while fed + 1000 < len(line) + len(body) + 2:  # 1000-byte reads, the body never whole
        server.receive_data(data[fed : fed + 1000])
        fed += 1000
        assert drain(server) == []
        assert server.partial and server.buffered == fed - len(line)
    server.receive_data(data[fed:])
    assert drain(server) == [Put(body, 3, 0, 60), Put(b"z", 0, 0, 1)]
    assert server.buffered == 0 and not server.partial


def test_eof_in_a_held_body_is_a_partial_close() -> None:
    server = ServerConnection()
    server.receive_data(b"put 0 0 1 100\r\n" + b"x" * 40)
    server.receive_data(b"y" * 40)
    assert drain(server) == [] and server.buffered == 80
    server.receive_data(b"")
    assert drain(server) == [("closed", True)]
