"""The RESP core fed bytes in every chunking: hand-written vectors (RESP2 and RESP3), random
values round-tripped through a test-side encoder, every framing rule and every cap."""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jobwire.errors import LocalProtocolError, RemoteProtocolError
from qless_client._resp import (
    NEED_DATA,
    Attribute,
    Connection,
    ConnectionClosed,
    ConnectionState,
    ErrorReply,
    Event,
    Push,
    Reply,
    Verbatim,
    encode_command,
    encode_evalsha,
)

# -- helpers -------------------------------------------------------------------------------------


def drain(conn: Connection) -> list[Event]:
    events: list[Event] = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return events
        events.append(event)
        if isinstance(event, ConnectionClosed):
            return events


def parse(data: bytes, cuts: list[int] | None = None, *, commands: int = 64,
          **caps: int) -> list[Event]:
    """Feed ``data`` split at ``cuts`` to a core with ``commands`` awaiting replies."""
    conn = Connection(**caps)
    for _ in range(commands):
        conn.send(["PING"])
    events: list[Event] = []
    start = 0
    for cut in [*sorted(set(cuts or [])), len(data)]:
        if cut == start:
            continue  # b"" would mean end of input
        conn.receive_data(data[start:cut])
        events += drain(conn)
        start = cut
    return events


def encode(value: Any) -> bytes:
    """A test-side RESP3 encoder (what a server sends), for the round-trip property."""
    if value is None:
        return b"_\r\n"
    if isinstance(value, bool):
        return b"#t\r\n" if value else b"#f\r\n"
    if isinstance(value, int):
        return (b":%d\r\n" if -(2**63) <= value < 2**63 else b"(%d\r\n") % value
    if isinstance(value, float):
        return b",%s\r\n" % repr(value).encode()
    if isinstance(value, Verbatim):
        return b"=%d\r\n%s:%s\r\n" % (len(value) + 4, value.format.encode(), bytes(value))
    if isinstance(value, bytes):
        return b"$%d\r\n%s\r\n" % (len(value), value)
    if isinstance(value, str):
        return b"+%s\r\n" % value.encode()
    if isinstance(value, ErrorReply):
        return b"-%s\r\n" % value.message.encode()
    if isinstance(value, list):
        return b"*%d\r\n" % len(value) + b"".join(encode(v) for v in value)
    if isinstance(value, set):
        return b"~%d\r\n" % len(value) + b"".join(encode(v) for v in value)
    if isinstance(value, dict):
        return b"%%%d\r\n" % len(value) + b"".join(encode(k) + encode(v) for k, v in value.items())
    raise TypeError(value)


def same(a: Any, b: Any) -> bool:
    """Equality that also holds for NaN and checks types (True is not 1, b"" is not "")."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Verbatim):
        return bytes(a) == bytes(b) and a.format == b.format
    return bool(a == b)


# -- hand-written vectors ------------------------------------------------------------------------

VECTORS: list[tuple[bytes, list[Event]]] = [
    # RESP2
    (b"+OK\r\n", [Reply("OK")]),
    (b"+\r\n", [Reply("")]),
    (b"-ERR unknown command 'x'\r\n", [ErrorReply("ERR unknown command 'x'")]),
    (b"-WRONGTYPE Operation against a key\r\n", [ErrorReply("WRONGTYPE Operation against a key")]),
    (b":1000\r\n:-42\r\n:0\r\n", [Reply(1000), Reply(-42), Reply(0)]),
    (b":9223372036854775807\r\n", [Reply(2**63 - 1)]),
    (b"$5\r\nhello\r\n", [Reply(b"hello")]),
    (b"$0\r\n\r\n", [Reply(b"")]),
    (b"$4\r\na\r\nb\r\n", [Reply(b"a\r\nb")]),
    (b"$-1\r\n", [Reply(None)]),
    (b"*2\r\n$3\r\nfoo\r\n:1\r\n", [Reply([b"foo", 1])]),
    (b"*0\r\n", [Reply([])]),
    (b"*-1\r\n", [Reply(None)]),
    (b"*2\r\n*1\r\n:1\r\n*0\r\n", [Reply([[1], []])]),
    (b"*3\r\n$-1\r\n-ERR in exec\r\n+QUEUED\r\n",
     [Reply([None, ErrorReply("ERR in exec"), "QUEUED"])]),
    # RESP3
    (b"_\r\n", [Reply(None)]),
    (b"#t\r\n#f\r\n", [Reply(True), Reply(False)]),
    (b",3.14\r\n,-1.5e+300\r\n,10\r\n,.5\r\n", [Reply(3.14), Reply(-1.5e300), Reply(10.0),
                                                Reply(0.5)]),
    (b",inf\r\n,-inf\r\n", [Reply(math.inf), Reply(-math.inf)]),
    (b"(3492890328409238509324850943850943825024385\r\n",
     [Reply(3492890328409238509324850943850943825024385)]),
    (b"(-12\r\n", [Reply(-12)]),
    (b"=15\r\ntxt:Some string\r\n", [Reply(Verbatim(b"Some string", "txt"))]),
    (b"!21\r\nSYNTAX invalid syntax\r\n", [ErrorReply("SYNTAX invalid syntax")]),
    (b"%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n:2\r\n", [Reply({"first": 1, b"second": 2})]),
    (b"%0\r\n", [Reply({})]),
    (b"~3\r\n+a\r\n+b\r\n+a\r\n", [Reply({"a", "b"})]),
    (b"%1\r\n*2\r\n:1\r\n:2\r\n+v\r\n", [Reply({(1, 2): "v"})]),  # aggregate key: a tuple
    (b"~1\r\n%1\r\n:1\r\n~1\r\n:2\r\n", [Reply({((1, frozenset({2})),)})]),
    (b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n"
     b"*2\r\n:2039123\r\n:9543892\r\n",
     [Attribute({"key-popularity": {b"a": 0.1923, b"b": 0.0012}}), Reply([2039123, 9543892])]),
    (b"*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n:2\r\n", [Reply([1, 2])]),  # nested: dropped
    # an attribute inside an attribute's value, inside an array: both dropped
    (b"*1\r\n|1\r\n+a\r\n|1\r\n+b\r\n:1\r\n:7\r\n:8\r\n", [Reply([8])]),
    (b">3\r\n$7\r\nmessage\r\n$3\r\nfoo\r\n$3\r\nbar\r\n:1\r\n",
     [Push([b"message", b"foo", b"bar"]), Reply(1)]),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_vectors_whole(data: bytes, expected: list[Event]) -> None:
    assert parse(data) == expected


@given(data=st.data())
def test_vectors_in_every_chunking(data: st.DataObject) -> None:
    stream = b"".join(v for v, _ in VECTORS)
    expected = [e for _, events in VECTORS for e in events]
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=60))
    assert parse(stream, cuts) == expected


def test_vectors_one_byte_at_a_time() -> None:
    stream = b"".join(v for v, _ in VECTORS)
    expected = [e for _, events in VECTORS for e in events]
    assert parse(stream, list(range(len(stream)))) == expected


def test_nan_and_push_kind() -> None:
    (reply,) = parse(b",nan\r\n")
    assert isinstance(reply, Reply) and math.isnan(reply.value)
    assert Push([b"invalidate", [b"k"]]).kind == "invalidate"
    assert ErrorReply("NOSCRIPT No matching script.").code == "NOSCRIPT"


def test_a_push_answers_no_command() -> None:
    conn = Connection()
    conn.receive_data(b">2\r\n+pubsub\r\n+x\r\n")
    assert drain(conn) == [Push(["pubsub", "x"])]
    assert conn.pending == 0
    conn.send(["GET", "k"])
    conn.receive_data(b">1\r\n+x\r\n$1\r\nv\r\n")
    assert drain(conn) == [Push(["x"]), Reply(b"v")]
    assert conn.pending == 0


# -- random values round-trip ------------------------------------------------------------------

_scalars = st.one_of(
    st.binary(max_size=40),
    st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]),
            max_size=20),
    st.integers(-(2**70), 2**70),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.builds(Verbatim, st.binary(max_size=20), st.sampled_from(["txt", "mkd"])),
    st.builds(ErrorReply, st.text(alphabet="ABCDEFG xyz", min_size=1, max_size=20)),
)
_keys = st.one_of(st.binary(max_size=10), st.integers(-1000, 1000))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(_keys, inner, max_size=4),
        st.sets(_keys, max_size=4),
    ),
    max_leaves=30,
)


@given(values=st.lists(_values, min_size=1, max_size=6), data=st.data())
def test_random_values_round_trip_in_any_chunking(values: list[Any], data: st.DataObject) -> None:
    stream = b"".join(encode(v) for v in values)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30))
    events = parse(stream, cuts)
    assert len(events) == len(values)
    for event, value in zip(events, values, strict=True):
        if isinstance(value, ErrorReply):
            assert event == value
        else:
            assert isinstance(event, Reply) and same(value, event.value), (value, event)


# -- commands ------------------------------------------------------------------------------------


class Color(enum.IntEnum):
    RED = 7


def test_encode_command() -> None:
    assert encode_command(["SET", "k", b"v\r\n"]) == (
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n"
    )
    assert encode_command(("ZADD", 12, -3, 1.5, float("inf"), "é")) == (
        b"*6\r\n$4\r\nZADD\r\n$2\r\n12\r\n$2\r\n-3\r\n$3\r\n1.5\r\n$3\r\ninf\r\n$2\r\n\xc3\xa9\r\n"
    )
    assert encode_command(["X", bytearray(b"ab"), memoryview(b"cd"), Color.RED, ""]) == (
        b"*5\r\n$1\r\nX\r\n$2\r\nab\r\n$2\r\ncd\r\n$1\r\n7\r\n$0\r\n\r\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        [],
        "GET k",
        b"GET",
        ["SET", "k", True],
        ["SET", "k", None],
        ["SET", "k", ["nested"]],
        ["SET", "k", "\ud800"],
        ["SUBSCRIBE", "ch"],
        [b"psubscribe", "ch*"],
        ["unsubscribe"],
        ["MONITOR"],
        ["client", "reply", "off"],
        ["RESET"],
    ],
)
def test_encode_refuses(args: Any) -> None:
    conn = Connection()
    with pytest.raises(LocalProtocolError):
        conn.send(args)
    assert conn.pending == 0  # nothing recorded


class _Text(str):
    pass


@given(st.sampled_from(["a" * 40, "é" * 3, ""]),
       st.lists(st.one_of(st.text(max_size=12), st.text("ab", max_size=5000), st.binary(max_size=4),
                          st.integers(), st.builds(_Text, st.text("xy", max_size=3))), max_size=8))
@example("a" * 40, ["put", "\ud800"])
@example("a" * 40, ["put", "é", "x" * 5000])
@example("é", ["put"])
@example("a" * 40, ["put", 7, b"\xff"])
def test_encode_evalsha_is_encode_command(sha: str, args: list[Any]) -> None:
    try:
        expected: bytes | type[Exception] = encode_command(["EVALSHA", sha, 0, *args])
    except LocalProtocolError:
        expected = LocalProtocolError
    try:
        got: bytes | type[Exception] = encode_evalsha(sha, args)
    except LocalProtocolError:
        got = LocalProtocolError
    assert got == expected


def test_caps_must_be_positive_ints() -> None:
    for caps in ({"max_bulk": 0}, {"max_depth": -1}, {"max_array": True}, {"max_line": 3}):
        with pytest.raises(LocalProtocolError):
            Connection(**caps)


# -- framing and caps ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"+O\nK\r\n",  # lone LF inside a line
        b"+O\rK\r\n",  # lone CR
        b"-ERR a\nb\r\n",
        b":+1\r\n",
        b": 1\r\n",
        b":1_0\r\n",
        b":\r\n",
        b":12345678901234567890\r\n",  # past 64 bits
        b":\xd9\xa1\r\n",  # a non-ASCII digit
        b"$5\r\nhelloXX",  # no CRLF after the bulk
        b"$-2\r\n",
        b"$abc\r\n",
        b"$ 5\r\n",
        b"$?\r\n",  # streamed string
        b"*?\r\n",
        b"%-1\r\n",
        b"=-1\r\n",
        b"=3\r\nabc\r\n",  # verbatim without "fmt:"
        b"#x\r\n",
        b"_x\r\n",
        b",1.2.3\r\n",
        b",infinity\r\n",
        b", 1\r\n",
        b"(12a\r\n",
        b"?\r\n",
        b"\r\n",
        b"*1\r\n>1\r\n:1\r\n",  # a push inside a value
    ],
)
def test_framing_violations_raise_and_poison(data: bytes) -> None:
    conn = Connection()
    conn.send(["PING"])
    conn.receive_data(data)
    with pytest.raises(RemoteProtocolError):
        drain(conn)
    assert conn.state is ConnectionState.ERROR
    with pytest.raises(RemoteProtocolError):
        conn.next_event()  # poisoned: raises again
    with pytest.raises(LocalProtocolError):
        conn.send(["PING"])


def test_a_reply_with_no_command_awaiting_it() -> None:
    conn = Connection()
    conn.receive_data(b"+OK\r\n")
    with pytest.raises(RemoteProtocolError, match="no command"):
        conn.next_event()


def test_line_cap_raises_before_the_line_ends() -> None:
    conn = Connection(max_line=16)
    conn.send(["PING"])
    conn.receive_data(b"+" + b"x" * 15)
    with pytest.raises(RemoteProtocolError, match="longer than 16"):
        conn.next_event()
    assert parse(b"+" + b"x" * 13 + b"\r\n", max_line=16) == [Reply("x" * 13)]


def test_bulk_cap_raises_at_the_header() -> None:
    assert parse(b"$10\r\n0123456789\r\n", max_bulk=10) == [Reply(b"0123456789")]
    for header in (b"$11\r\n", b"=11\r\n", b"!11\r\n"):
        with pytest.raises(RemoteProtocolError, match="max_bulk"):
            parse(header, max_bulk=10)  # raised before a byte of the body is buffered


def test_array_cap() -> None:
    assert parse(b"*3\r\n:1\r\n:2\r\n:3\r\n", max_array=3) == [Reply([1, 2, 3])]
    for header in (b"*4\r\n", b"%4\r\n", b"~4\r\n", b">4\r\n", b"|4\r\n"):
        with pytest.raises(RemoteProtocolError, match="max_array"):
            parse(header, max_array=3)
    with pytest.raises(RemoteProtocolError, match="max_array"):
        parse(b"*9223372036854775807\r\n")


def test_depth_cap() -> None:
    deep = b"*1\r\n" * 3 + b":1\r\n"
    assert parse(deep, max_depth=3) == [Reply([[[1]]])]
    with pytest.raises(RemoteProtocolError, match="deeper than 3"):
        parse(b"*1\r\n" * 4, max_depth=3)
    with pytest.raises(RemoteProtocolError, match="deeper than 64"):
        parse(b"*1\r\n" * 100_000)  # no recursion: the cap, not a RecursionError


# -- one reply as a whole: values and bytes at every level of nesting ---------------------------


def count_values(value: Any) -> int:
    """How many values ``encode(value)`` holds, the value itself and a map's keys included."""
    if isinstance(value, (list, set)):
        return 1 + sum(count_values(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(count_values(k) + count_values(v) for k, v in value.items())
    return 1


def test_reply_items_cap_counts_every_level() -> None:
    nested = b"*2\r\n*2\r\n:1\r\n:2\r\n%1\r\n+k\r\n~0\r\n"  # 1 + 2 + 2 + 2 values
    assert parse(nested, max_reply_items=7) == [Reply([[1, 2], {"k": set()}])]
    with pytest.raises(RemoteProtocolError, match="max_reply_items 6"):
        parse(nested, max_reply_items=6)
    # Each reply has its own count: two replies at the cap both pass.
    assert parse(nested * 2, max_reply_items=7) == [Reply([[1, 2], {"k": set()}])] * 2
    # Refused at the header that announces too many, before its elements arrive.
    with pytest.raises(RemoteProtocolError, match="max_reply_items"):
        parse(b"*1\r\n*5\r\n", max_reply_items=5)


def test_reply_bytes_cap_counts_lines_and_bodies() -> None:
    data = b"*2\r\n$3\r\nabc\r\n:1\r\n"  # 4 + 4 + 5 + 4 bytes
    assert parse(data, max_reply_bytes=17) == [Reply([b"abc", 1])]
    with pytest.raises(RemoteProtocolError, match="max_reply_bytes 16"):
        parse(data, max_reply_bytes=16)
    # A bulk string that would pass the total is refused at its header, its body not awaited.
    with pytest.raises(RemoteProtocolError, match="max_reply_bytes"):
        parse(b"*1\r\n$1000\r\n", max_reply_bytes=100)
    assert parse(data * 3, max_reply_bytes=17) == [Reply([b"abc", 1])] * 3


def test_the_reply_caps_must_be_positive_ints() -> None:
    for caps in ({"max_reply_items": 0}, {"max_reply_bytes": -1}, {"max_reply_items": True}):
        with pytest.raises(LocalProtocolError):
            Connection(**caps)


def test_empty_sets_nested_are_refused_with_the_default_caps() -> None:
    # The audit's input: 8 MB of empty sets, nested so that no aggregate passes max_array. It
    # was two million Python sets (449 MB); now refused once the reply passes 2**20 values.
    raw = b"*2048\r\n" + (b"*1024\r\n" + b"~0\r\n" * 1024) * 2048
    conn = Connection()
    conn.send(["PING"])
    with pytest.raises(RemoteProtocolError, match="max_reply_items 1048576"):
        for start in range(0, len(raw), 1 << 16):
            conn.receive_data(raw[start:start + (1 << 16)])
            assert drain(conn) == []
    with pytest.raises(RemoteProtocolError):  # poisoned
        conn.next_event()


@given(value=_values, data=st.data())
def test_reply_caps_refuse_exactly_what_passes_them(value: Any, data: st.DataObject) -> None:
    raw = encode(value)
    items, size = count_values(value), len(raw)
    max_items = data.draw(st.integers(1, items + 2), label="max_reply_items")
    max_bytes = data.draw(st.integers(4, size + 2), label="max_reply_bytes")
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=10))
    caps = {"max_reply_items": max_items, "max_reply_bytes": max_bytes}
    if items <= max_items and size <= max_bytes:
        events = parse(raw + raw, cuts, **caps)  # the second reply counts afresh
        assert len(events) == 2
        for event in events:
            if isinstance(value, ErrorReply):
                assert event == value
            else:
                assert isinstance(event, Reply) and same(value, event.value), (value, event)
    else:
        with pytest.raises(RemoteProtocolError, match="max_reply_"):
            parse(raw, cuts, **caps)


def test_default_depth_is_accepted_one_byte_at_a_time() -> None:
    data = b"*1\r\n" * 64 + b"$1\r\nx\r\n"
    (reply,) = parse(data, list(range(len(data))))
    value = reply.value  # type: ignore[attr-defined]
    for _ in range(64):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == b"x"


def test_big_number_past_pythons_digit_limit() -> None:
    with pytest.raises(RemoteProtocolError, match="too long"):
        parse(b"(" + b"9" * 5000 + b"\r\n")


# -- linear parsing ------------------------------------------------------------------------------


def test_a_16_mib_bulk_in_small_chunks() -> None:
    size = 16 * 1024 * 1024
    body = bytes(range(256)) * (size // 256)
    conn = Connection()
    conn.send(["GET", "big"])
    conn.receive_data(b"$%d\r\n" % size)
    assert conn.next_event() is NEED_DATA
    chunk = 256
    for start in range(0, size, chunk):  # 65536 reads: a parser that rescans never finishes
        conn.receive_data(body[start : start + chunk])
        assert conn.next_event() is NEED_DATA
    conn.receive_data(b"\r")
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"\n+OK\r\n")
    assert conn.next_event() == Reply(body)
    with pytest.raises(RemoteProtocolError):  # "+OK" answers nothing
        conn.next_event()


def test_a_large_array_in_tiny_chunks() -> None:
    count = 100_000
    data = b"*%d\r\n" % count + b"".join(b"$1\r\n%d\r\n" % (i % 10) for i in range(count))
    conn = Connection()
    conn.send(["LRANGE", "l", 0, -1])
    for start in range(0, len(data), 5):  # a half-read array is never parsed again
        conn.receive_data(data[start : start + 5])
        event = conn.next_event()
    assert event == Reply([b"%d" % (i % 10) for i in range(count)])


def test_pipelined_replies_in_one_read() -> None:
    conn = Connection()
    for i in range(10_000):
        conn.send(["GET", f"k{i}"])
    conn.receive_data(b"".join(b"$%d\r\n%d\r\n" % (len(str(i)), i) for i in range(10_000)))
    events = drain(conn)
    assert events == [Reply(str(i).encode()) for i in range(10_000)]
    assert conn.pending == 0


def _one_bulk(body: bytes, header: bytes, end: bytes, tail: bytes) -> bytes:
    return b"$%s\r\n%s%s%s" % (header or b"%d" % len(body), body, end, tail)


_BULKISH = st.builds(
    _one_bulk, st.binary(max_size=24),
    st.sampled_from([b"", b"", b"", b"-1", b"007", b"99", b"x", b"1" * 21]),
    st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"XY", b"\n\n"]),
    st.sampled_from([b"", b"", b"", b"\r\n", b"$0\r\n\r\n", b"x", b"+OK\r\n"]),
)


@given(st.one_of(st.binary(max_size=24), _BULKISH, _BULKISH),
       st.lists(st.sampled_from([-1, 0, 0, 8]), min_size=3, max_size=3), st.integers(0, 2))
# Each cap just under and at what one bulk reply needs; the terminator; the header's forms.
@example(b"$5\r\nhello\r\n", [-1, 0, 0], 1)
@example(b"$10\r\n0123456789\r\n", [0, -1, 0], 1)
@example(b"$5\r\nhello\r\n", [0, 0, -1], 1)
@example(b"$5\r\nhello\r\n", [0, 0, 0], 1)
@example(b"$5\r\nhelloXY", [0, 0, 0], 1)
@example(b"$5\r\nhello\r\n", [0, 0, 0], 0)
@example(b"$-1\r\n", [0, 0, 0], 1)
@example(b"$007\r\nhello\r\n", [0, 0, 0], 1)
@example(b"$\r\n", [0, 0, 0], 1)
@example(b"$5\r\nhello\r\n$0\r\n\r\n", [8, 8, 8], 2)
def test_one_whole_bulk_takes_the_short_path_exactly_as_the_parser_reads_it(
    data: bytes, offsets: list[int], commands: int
) -> None:
    # The caps: what ``data`` needs if it is one bulk reply (its size, header line, whole
    # length) plus each offset, so runs land on either side of every cap.
    head = data.partition(b"\r\n")[0]
    size = int(head[1:]) if head[1:].isdigit() else len(data)
    needs = [max(size + offsets[0], 1), max(len(head) + 2 + offsets[1], 4),
             max(len(data) + offsets[2], 1)]
    caps = dict(zip(("max_bulk", "max_line", "max_reply_bytes"), needs, strict=True))
    fast, slow = Connection(**caps), Connection(**caps)
    for _ in range(commands):
        fast.send(["GET", "k"])
        slow.send(["GET", "k"])
    try:
        slow.receive_data(data)
        expected: list[Event] | type[RemoteProtocolError] = drain(slow)
    except RemoteProtocolError:
        expected = RemoteProtocolError
    batch = fast.receive_batch(data)
    if batch is not None:  # taken: the one reply the parser reads, answering one command
        assert expected == batch and len(batch) == 1 and isinstance(batch[0], Reply)
        assert fast.pending == slow.pending == commands - 1
        assert fast.next_event() is NEED_DATA
        return
    assert fast.pending == commands  # not taken: nothing was fed
    try:
        fast.receive_data(data)
        assert drain(fast) == expected
    except RemoteProtocolError:
        assert expected is RemoteProtocolError


def test_the_bulk_short_path_is_only_for_a_clean_start() -> None:
    conn = Connection()
    conn.send(["GET", "a"])
    assert conn.receive_batch(b"$2\r\nhi\r\n") == [Reply(b"hi")]
    assert conn.receive_batch(b"$2\r\nhi\r\n") is None  # no command awaits it
    conn.send(["GET", "a"])
    conn.send(["GET", "b"])
    conn.receive_data(b"$1\r\n")
    assert conn.receive_batch(b"$2\r\nhi\r\n") is None  # something is buffered already
    conn.receive_data(b"$\r\n$2\r\nhi\r\n")
    assert drain(conn) == [Reply(b"$"), Reply(b"hi")]
    conn.send(["GET", "a"])
    conn.receive_data(b"")
    assert conn.receive_batch(b"$2\r\nhi\r\n") is None  # after EOF


# -- end of input --------------------------------------------------------------------------------


def test_eof_mid_bulk_is_partial() -> None:
    conn = Connection()
    conn.send(["GET", "a"])
    conn.send(["GET", "b"])
    conn.receive_data(b"$10\r\nhal")
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    assert conn.next_event() == ConnectionClosed(pending=2, partial=True)
    assert conn.next_event() == ConnectionClosed(pending=2, partial=True)
    with pytest.raises(LocalProtocolError):
        conn.send(["PING"])


def test_data_after_eof_raises_and_is_not_fed() -> None:
    conn = Connection()
    conn.send(["PING"])
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after EOF"):
        conn.receive_data(b"+PONG\r\n")
    assert drain(conn) == [ConnectionClosed(pending=1, partial=False)]


def test_eof_mid_array_and_between_replies() -> None:
    conn = Connection()
    conn.send(["X"])
    conn.receive_data(b"*2\r\n:1\r\n")
    conn.receive_data(b"")
    assert drain(conn) == [ConnectionClosed(pending=1, partial=True)]
    conn = Connection()
    conn.send(["X"])
    conn.receive_data(b":1\r\n")
    conn.receive_data(b"")
    assert drain(conn) == [Reply(1), ConnectionClosed(pending=0, partial=False)]
