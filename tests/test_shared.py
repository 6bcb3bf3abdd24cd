"""Tests of what every protocol shares: ReceiveBuffer, parse_url, Backoff, the pipeline's
bookkeeping and BulkError."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobwire import Backoff, LocalProtocolError, TCPAddress, UnixAddress, parse_url
from jobwire._buffer import _COMPACT_AT, _VIEW_AT, LineTooLong, MissingTerminator, ReceiveBuffer
from jobwire._pending import Pending
from jobwire._transport import _Pipeline
from jobwire.errors import BulkError, ConnectionLost, JobwireError, NotSent

# -- ReceiveBuffer -----------------------------------------------------------------------------


class TestLines:
    def test_crlf_ends_a_line_and_is_stripped(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"first\r\nsecond\r\n")
        assert buf.extract_line() == b"first"
        assert buf.extract_line() == b"second"
        assert buf.extract_line() is None
        assert len(buf) == 0
        assert not buf

    def test_bare_lf_and_bare_cr_do_not_end_a_line(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"a\nb\rc\n")
        assert buf.extract_line() is None
        buf.feed(b"\r\n")
        assert buf.extract_line() == b"a\nb\rc\n"

    def test_empty_line(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"\r\n\r\nx\r\n")
        assert buf.extract_line() == b""
        assert buf.extract_line() == b""
        assert buf.extract_line() == b"x"

    def test_lone_cr_at_a_chunk_boundary(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abc\r")
        assert buf.extract_line() is None
        buf.feed(b"\n")
        assert buf.extract_line() == b"abc"

    def test_lone_cr_at_a_boundary_followed_by_something_else(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abc\r")
        assert buf.extract_line() is None
        buf.feed(b"x")
        assert buf.extract_line() is None
        buf.feed(b"\r")
        assert buf.extract_line() is None
        buf.feed(b"\n")
        assert buf.extract_line() == b"abc\rx"

    def test_cr_then_crlf(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abc\r")
        assert buf.extract_line() is None
        buf.feed(b"\r\n")
        assert buf.extract_line() == b"abc\r"

    def test_one_byte_at_a_time(self) -> None:
        buf = ReceiveBuffer()
        out = []
        for byte in b"ab\r\n\r\ncd\re\r\n":
            buf.feed(bytes([byte]))
            line = buf.extract_line()
            if line is not None:
                out.append(line)
        assert out == [b"ab", b"", b"cd\re"]


class _RecordingArray(bytearray):
    """A bytearray that records where each search for a terminator started."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[int] = []

    def find(self, sub, start=None, *args):  # type: ignore[no-untyped-def, override]
        self.starts.append(0 if start is None else start)
        return super().find(sub, start, *args)


class TestSearchCursor:
    def test_a_partial_line_is_not_rescanned(self) -> None:
        buf = ReceiveBuffer()
        arr = _RecordingArray()
        buf._data = arr  # type: ignore[misc]
        for _ in range(500):
            before = len(arr)
            buf.feed(b"x")
            assert buf.extract_line() is None
            # The search resumed at the last byte already seen (it may be a CR), not at 0.
            assert arr.starts[-1] >= before - 1
        buf.feed(b"\r\n")
        assert buf.extract_line() == b"x" * 500
        assert buf._data == b"" and not buf  # emptied: the next chunk is kept as it comes

    def test_cursor_keeps_a_trailing_cr_in_view(self) -> None:
        buf = ReceiveBuffer()
        arr = _RecordingArray()
        buf._data = arr  # type: ignore[misc]
        buf.feed(b"abc\r")
        assert buf.extract_line() is None
        buf.feed(b"\n")
        assert buf.extract_line() == b"abc"
        assert arr.starts == [0, 3]

    def test_cursor_after_consuming_a_line(self) -> None:
        buf = ReceiveBuffer()
        arr = _RecordingArray()
        buf._data = arr  # type: ignore[misc]
        buf.feed(b"ab\r\ncdef")
        assert buf.extract_line() == b"ab"
        assert buf.extract_line() is None
        buf.feed(b"gh\r\n")
        assert buf.extract_line() == b"cdefgh"
        # second search starts at the line start (4), third resumes at the last byte seen (7)
        assert arr.starts == [0, 4, 7]


class TestLimit:
    def test_line_exactly_at_the_limit_fits(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abc\r\n")
        assert buf.extract_line(limit=5) == b"abc"

    def test_complete_line_over_the_limit_raises(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abcd\r\n")
        with pytest.raises(LineTooLong) as info:
            buf.extract_line(limit=5)
        assert info.value.length == 6

    def test_incomplete_line_reaching_the_limit_raises(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abcde")
        with pytest.raises(LineTooLong) as info:
            buf.extract_line(limit=5)
        assert info.value.length >= 5

    def test_trailing_cr_at_the_limit_raises(self) -> None:
        # 4 bytes + CR = 5 buffered: with the LF the line would be 6 > 5.
        buf = ReceiveBuffer()
        buf.feed(b"abcd\r")
        with pytest.raises(LineTooLong):
            buf.extract_line(limit=5)

    def test_trailing_cr_one_under_the_limit_waits(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abcd\r")
        assert buf.extract_line(limit=6) is None
        buf.feed(b"\n")
        assert buf.extract_line(limit=6) == b"abcd"

    def test_limit_applies_to_the_next_line_only(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"ab\r\n" + b"y" * 100)
        assert buf.extract_line(limit=5) == b"ab"
        with pytest.raises(LineTooLong):
            buf.extract_line(limit=5)

    def test_too_long_leaves_the_buffer_alone(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abcdefgh\r\nok\r\n")
        with pytest.raises(LineTooLong):
            buf.extract_line(limit=5)
        assert len(buf) == 14
        assert buf.extract_line() == b"abcdefgh"
        assert buf.extract_line(limit=5) == b"ok"

    def test_line_length_so_far(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"ab\r\ncde")
        assert buf.extract_line() == b"ab"
        assert buf.line_length_so_far() == 3


class TestExtractExactlyAndDiscard:
    def test_extract_exactly(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"hello world")
        assert buf.extract_exactly(0) == b""
        assert buf.extract_exactly(5) == b"hello"
        assert buf.extract_exactly(7) is None
        assert len(buf) == 6
        assert buf.extract_exactly(6) == b" world"
        assert len(buf) == 0
        assert buf.extract_exactly(1) is None

    def test_extract_exactly_across_feeds_and_crlf(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"RES\r")
        assert buf.extract_line() is None
        buf.feed(b"\nab\r\ncd\r\nnext\r\n")
        assert buf.extract_line() == b"RES"
        assert buf.extract_exactly(8) == b"ab\r\ncd\r\n"
        assert buf.extract_line() == b"next"

    def test_peek_does_not_consume(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abc")
        assert buf.peek(2) == b"ab"
        assert buf.peek(4) is None
        assert buf.extract_exactly(3) == b"abc"

    def test_discard(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"0123456789")
        assert buf.discard(3) == 3
        assert buf.discard(100) == 7
        assert buf.discard(1) == 0
        buf.feed(b"x\r\n")
        assert buf.extract_line() == b"x"

    def test_discard_through_crlf_found(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"junk\rjunk\r\nok\r\n")
        assert buf.discard_through_crlf() is True
        assert buf.extract_line() == b"ok"

    def test_discard_through_crlf_keeps_a_trailing_cr(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"junk\r")
        assert buf.discard_through_crlf() is False
        assert len(buf) == 1
        buf.feed(b"\nok\r\n")
        assert buf.discard_through_crlf() is True
        assert buf.extract_line() == b"ok"

    def test_discard_through_crlf_drops_everything_without_cr(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"junk\n")
        assert buf.discard_through_crlf() is False
        assert len(buf) == 0
        buf.feed(b"ok\r\n")
        assert buf.extract_line() == b"ok"

    def test_discard_through_crlf_after_a_failed_line_search(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"aaaa")
        assert buf.extract_line() is None
        buf.feed(b"\r\nbb\r\n")
        assert buf.discard_through_crlf() is True
        assert buf.extract_line() == b"bb"


class TestExtractTerminated:
    def test_block_and_terminator_removed(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"ab\r\ncd\r\nnext\r\n")
        assert buf.extract_terminated(6) == b"ab\r\ncd"
        assert buf.extract_line() == b"next"
        assert not buf

    def test_waits_for_the_terminator(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abc\r")
        assert buf.extract_terminated(3) is None
        buf.feed(b"\n")
        assert buf.extract_terminated(3) == b"abc"

    def test_something_else_after_the_block_is_refused_and_nothing_removed(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"abcXY")
        with pytest.raises(MissingTerminator):
            buf.extract_terminated(3)
        assert buf.peek(5) == b"abcXY"

    def test_a_large_block_across_many_feeds(self) -> None:
        body = bytes(range(256)) * (4 * _VIEW_AT // 256 + 3)  # over the view threshold
        buf = ReceiveBuffer()
        buf.feed(b"LINE\r\n" + body[:100])
        assert buf.extract_line() == b"LINE"
        for i in range(100, len(body), 1000):
            assert buf.extract_terminated(len(body)) is None
            buf.feed(body[i : i + 1000])
        buf.feed(b"\r\nafter")
        assert buf.extract_terminated(len(body)) == body
        buf.feed(b"more")  # the array from which the block was copied can still grow
        assert buf.extract_line() is None
        buf.feed(b"\r\n")
        assert buf.extract_line() == b"aftermore"


class TestCompaction:
    def test_many_lines_through_a_small_window(self) -> None:
        lines = [b"line-%06d" % i for i in range(30_000)]  # 13 bytes each, ~380 KiB in all
        stream = b"".join(line + b"\r\n" for line in lines)
        buf = ReceiveBuffer()
        got = []
        peak = compactions = 0
        # 7919 is prime: chunk ends meet line ends only every 13 * 7919 bytes (> 64 KiB), so
        # the buffer is not simply emptied and must be compacted while it holds lines.
        for i in range(0, len(stream), 7919):
            buf.feed(stream[i : i + 7919])
            peak = max(peak, len(buf._data))
            while True:
                before = len(buf._data)
                line = buf.extract_line(limit=64)
                if line is None:
                    break
                got.append(line)
                if 0 < len(buf._data) < before:
                    compactions += 1
        assert got == lines
        assert compactions > 0
        assert peak < 2 * _COMPACT_AT + 8192

    @pytest.mark.parametrize("how", ["line", "exactly", "discard", "through"])
    def test_lines_left_after_compaction_are_found(self, how: str) -> None:
        big = b"x" * (_COMPACT_AT + 500)
        buf = ReceiveBuffer()
        buf.feed(big + b"\r\nab\r\ncd\r\npartial")
        if how == "line":
            assert buf.extract_line() == big
        elif how == "exactly":
            assert buf.extract_exactly(len(big) + 2) == big + b"\r\n"
        elif how == "discard":
            assert buf.discard(len(big) + 2) == len(big) + 2
        else:
            assert buf.discard_through_crlf() is True
        assert len(buf._data) < _COMPACT_AT  # the dead prefix was dropped
        assert buf.extract_line() == b"ab"
        assert buf.extract_line() == b"cd"
        assert buf.extract_line() is None
        buf.feed(b"\r\n")
        assert buf.extract_line() == b"partial"

    def test_cursor_survives_compaction(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"y" * 10 + b"\r\n" + b"z" * 80_000)
        assert buf.extract_line() == b"y" * 10
        assert buf.extract_line() is None  # the cursor is now deep inside the z's
        assert buf.extract_exactly(70_000) == b"z" * 70_000  # compacts
        buf.feed(b"\r\nnext\r\n")
        assert buf.extract_line() == b"z" * 10_000
        assert buf.extract_line() == b"next"

    def test_compaction_in_the_middle_of_a_partial_line(self) -> None:
        buf = ReceiveBuffer()
        buf.feed(b"z" * (_COMPACT_AT + 10) + b"partial")
        assert buf.extract_exactly(_COMPACT_AT + 10) == b"z" * (_COMPACT_AT + 10)
        assert len(buf._data) < _COMPACT_AT  # compacted
        assert buf.extract_line() is None
        buf.feed(b" line\r")
        assert buf.extract_line() is None
        buf.feed(b"\n")
        assert buf.extract_line() == b"partial line"


# A reference model: a bytes object and the documented semantics, nothing clever.


class _Model:
    def __init__(self) -> None:
        self.data = b""

    def feed(self, chunk: bytes) -> None:
        self.data += chunk

    def extract_line(self, limit: int | None) -> bytes | None:
        idx = self.data.find(b"\r\n")
        if idx < 0:
            if limit is not None and len(self.data) >= limit:
                raise LineTooLong(len(self.data))
            return None
        if limit is not None and idx + 2 > limit:
            raise LineTooLong(idx + 2)
        line, self.data = self.data[:idx], self.data[idx + 2 :]
        return line

    def extract_exactly(self, n: int) -> bytes | None:
        if n > len(self.data):
            return None
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk

    def extract_terminated(self, n: int) -> bytes | None:
        if n + 2 > len(self.data):
            return None
        if self.data[n : n + 2] != b"\r\n":
            raise MissingTerminator(n)
        block, self.data = self.data[:n], self.data[n + 2 :]
        return block

    def peek(self, n: int) -> bytes | None:
        return None if n > len(self.data) else self.data[:n]

    def discard(self, n: int) -> int:
        n = min(n, len(self.data))
        self.data = self.data[n:]
        return n

    def discard_through_crlf(self) -> bool:
        idx = self.data.find(b"\r\n")
        if idx >= 0:
            self.data = self.data[idx + 2 :]
            return True
        self.data = b"\r" if self.data.endswith(b"\r") else b""
        return False


_pieces = st.sampled_from([b"\r\n", b"\r", b"\n", b"a", b"bc", b"\x00", b"\xff", b" "])
_small_chunk = st.lists(_pieces, max_size=12).map(b"".join)
# Large feeds are a short pattern repeated, so crossing 64 KiB costs hypothesis nothing.
_big_chunk = st.builds(
    lambda pattern, count: pattern * count,
    st.lists(_pieces, min_size=1, max_size=4).map(b"".join),
    st.integers(30_000, 70_000),  # 30 KiB to 560 KiB: a few feeds cross the 64 KiB mark
)
# Small amounts, and amounts that consume more than the 64 KiB that triggers compaction.
_amount = st.one_of(st.integers(0, 64), st.integers(_COMPACT_AT - 100, 2 * _COMPACT_AT))
_ops = st.one_of(
    st.tuples(st.just("feed"), st.one_of(_small_chunk, _big_chunk)),
    st.tuples(st.just("line"), st.one_of(st.none(), st.integers(1, 300))),
    st.tuples(st.just("exactly"), _amount),
    st.tuples(st.just("terminated"), _amount),
    st.tuples(st.just("peek"), st.integers(0, 40)),
    st.tuples(st.just("discard"), _amount),
    st.tuples(st.just("through"), st.none()),
)


@given(st.lists(_ops, max_size=40))
def test_buffer_matches_reference_model(ops: list[tuple[str, object]]) -> None:
    buf, model = ReceiveBuffer(), _Model()
    for op, arg in ops:
        if op == "feed":
            assert isinstance(arg, bytes)
            buf.feed(arg)
            model.feed(arg)
        elif op == "line":
            assert arg is None or isinstance(arg, int)
            try:
                expected: object = model.extract_line(arg)
            except LineTooLong:
                with pytest.raises(LineTooLong):
                    buf.extract_line(arg)
            else:
                assert buf.extract_line(arg) == expected
        elif op == "exactly":
            assert isinstance(arg, int)
            assert buf.extract_exactly(arg) == model.extract_exactly(arg)
        elif op == "terminated":
            assert isinstance(arg, int)
            try:
                expected = model.extract_terminated(arg)
            except MissingTerminator:
                with pytest.raises(MissingTerminator):
                    buf.extract_terminated(arg)
            else:
                assert buf.extract_terminated(arg) == expected
        elif op == "peek":
            assert isinstance(arg, int)
            assert buf.peek(arg) == model.peek(arg)
        elif op == "discard":
            assert isinstance(arg, int)
            assert buf.discard(arg) == model.discard(arg)
        else:
            assert buf.discard_through_crlf() == model.discard_through_crlf()
        assert len(buf) == len(model.data)
        assert bool(buf) == bool(model.data)
    # Whatever is left is byte-for-byte what the model holds.
    assert buf.extract_exactly(len(model.data)) == model.data


# -- parse_url ---------------------------------------------------------------------------------


def _bs(url: str) -> object:
    return parse_url(url, scheme="beanstalk", default_port=11300)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("beanstalk://localhost", TCPAddress("localhost", 11300)),
        ("beanstalk://localhost/", TCPAddress("localhost", 11300)),
        ("beanstalk://10.0.0.2:11301", TCPAddress("10.0.0.2", 11301)),
        ("beanstalk://queue.example:1", TCPAddress("queue.example", 1)),
        ("beanstalk://queue.example:65535", TCPAddress("queue.example", 65535)),
        ("beanstalk://[::1]:11400", TCPAddress("::1", 11400)),
        ("beanstalk://[::1]", TCPAddress("::1", 11300)),
        ("unix:///run/beanstalkd.sock", UnixAddress("/run/beanstalkd.sock")),
        ("beanstalk+unix:///tmp/b.sock", UnixAddress("/tmp/b.sock")),
        ("unix:///tmp/with%20space.sock", UnixAddress("/tmp/with space.sock")),
    ],
)
def test_parse_url_accepts(url: str, expected: object) -> None:
    assert _bs(url) == expected


def test_address_str() -> None:
    assert str(TCPAddress("::1", 11400)) == "[::1]:11400"
    assert str(TCPAddress("h", 1)) == "h:1"
    assert str(UnixAddress("/x.sock")) == "unix:/x.sock"


def test_parse_url_uses_the_callers_scheme_and_default_port() -> None:
    assert parse_url("gearman://h", scheme="gearman", default_port=4730) == TCPAddress("h", 4730)
    assert parse_url("gearman+unix:///g", scheme="gearman", default_port=4730) == UnixAddress("/g")
    with pytest.raises(LocalProtocolError):
        parse_url("beanstalk://h", scheme="gearman", default_port=4730)
    with pytest.raises(LocalProtocolError):
        parse_url("beanstalk+unix:///g", scheme="gearman", default_port=4730)


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost",  # another scheme
        "http://localhost:11300",
        "localhost:11300",  # no scheme at all
        "beanstalk://host:abc",  # bad ports
        "beanstalk://host:-1",
        "beanstalk://host:+1",
        "beanstalk://host:65536",
        "beanstalk://host:99999999999",
        "beanstalk://",  # no host
        "beanstalk://:11300",
        "beanstalk://host/tube",  # path, query, fragment
        "beanstalk://host:11300/x/y",
        "beanstalk://host?timeout=1",
        "beanstalk://host#frag",
        "unix://",  # no path
        "beanstalk+unix://",
    ],
)
def test_parse_url_refuses(url: str) -> None:
    with pytest.raises(LocalProtocolError):
        _bs(url)


def test_parse_url_error_is_also_a_value_error() -> None:
    with pytest.raises(ValueError):
        _bs("beanstalk://host:port")


def test_parse_url_refuses_port_zero() -> None:
    with pytest.raises(LocalProtocolError):
        _bs("beanstalk://host:0")


@pytest.mark.parametrize("url", ["unix:///tmp/a?b.sock", "unix:///tmp/a#b.sock"])
def test_unix_url_with_query_or_fragment_is_not_truncated(url: str) -> None:
    try:
        address = _bs(url)
    except LocalProtocolError:
        return  # refusing is fine too
    assert address == UnixAddress(url.removeprefix("unix://"))


# -- Backoff -----------------------------------------------------------------------------------


class _TopRandom(random.Random):
    """Always draws the top of the range, exposing the ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_backoff_growth_and_cap() -> None:
    backoff = Backoff(base=0.5, cap=5.0, factor=2.0, rng=_TopRandom())
    assert [backoff.next_delay() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert backoff.attempts == 7


def test_backoff_reset_starts_over() -> None:
    backoff = Backoff(base=0.25, cap=100.0, factor=3.0, rng=_TopRandom())
    for _ in range(5):
        backoff.next_delay()
    backoff.reset()
    assert backoff.attempts == 0
    assert backoff.next_delay() == 0.25
    assert backoff.next_delay() == 0.75


@given(
    base=st.floats(0.001, 5.0),
    extra=st.floats(0.0, 50.0),
    factor=st.floats(1.0, 10.0),
    seed=st.integers(0, 2**32),
)
def test_backoff_bounds(base: float, extra: float, factor: float, seed: int) -> None:
    cap = base + extra
    backoff = Backoff(base=base, cap=cap, factor=factor, rng=random.Random(seed))
    for n in range(80):
        delay = backoff.next_delay()
        assert 0.0 <= delay <= min(cap, base * factor**n)


def test_backoff_is_deterministic_with_a_seeded_random() -> None:
    a = Backoff(base=0.1, cap=10.0, rng=random.Random(1234))
    b = Backoff(base=0.1, cap=10.0, rng=random.Random(1234))
    seq_a = [a.next_delay() for _ in range(20)]
    seq_b = [b.next_delay() for _ in range(20)]
    assert seq_a == seq_b
    ref = random.Random(1234)
    assert seq_a == [ref.uniform(0, min(10.0, 0.1 * 2.0**n)) for n in range(20)]
    assert len(set(seq_a)) > 1  # it is jittered, not constant


def test_backoff_many_attempts_does_not_overflow() -> None:
    backoff = Backoff(rng=random.Random(0))
    for _ in range(2000):
        assert 0.0 <= backoff.next_delay() <= 10.0


def test_backoff_large_factor_does_not_overflow() -> None:
    backoff = Backoff(base=0.1, cap=10.0, factor=1e5, rng=random.Random(0))
    for _ in range(100):
        assert 0.0 <= backoff.next_delay() <= 10.0


@pytest.mark.parametrize(
    "kwargs",
    [{"base": 0.0}, {"base": -1.0}, {"base": 2.0, "cap": 1.0}, {"factor": 0.5}],
)
def test_backoff_refuses_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)  # type: ignore[arg-type]


# -- the pipeline's window and byte budget -----------------------------------------------------


def _run_pipeline(sizes: list[int], window: int, budget: int | None) -> list[tuple[int, int]]:
    """Queue requests of ``sizes`` through the bookkeeping of ``Transport.pipeline``, answering
    in order (as the servers do) only what it waits for. Returns the unanswered (count, bytes)
    right after each request is queued."""
    state = _Pipeline(window, budget, len if budget is not None else None)
    answered = 0
    seen = []
    for nbytes in sizes:
        while (waited := state.blocker(nbytes)) is not None:
            assert not waited.done  # it always waits for something that will come
            while not waited.done:
                state.pendings[answered].resolve(None)
                answered += 1
        state.add(Pending("x"), nbytes)
        unanswered = state.pendings[answered:]
        seen.append((len(unanswered), sum(state.sizes[answered:])))
    return seen


@given(
    sizes=st.lists(st.integers(0, 9000), max_size=200),
    window=st.integers(1, 40),
    budget=st.one_of(st.none(), st.integers(1, 8192)),
)
def test_pipeline_keeps_the_window_and_the_byte_budget(
    sizes: list[int], window: int, budget: int | None
) -> None:
    for i, (count, nbytes) in enumerate(_run_pipeline(sizes, window, budget)):
        assert count <= window
        if budget is not None:
            # Over the budget only a request that is alone: larger than the budget itself.
            assert nbytes <= budget or (count == 1 and sizes[i] > budget)


def test_pipeline_refills_in_batches() -> None:
    # 4096-byte budget, 242-byte requests: 16 fit; then it waits for the budget to half drain
    # (fewer, larger writes) rather than for every single reply.
    seen = _run_pipeline([242] * 100, 256, 4096)
    assert seen[15] == (16, 3872)
    assert max(count for count, _ in seen) == 16
    assert seen[16][0] == 8 + 1  # waited until 8 were left, then queued one more
    # Without a budget the window rules: 256 at most, refilled at half.
    seen = _run_pipeline([242] * 600, 256, None)
    assert max(count for count, _ in seen) == 256 and seen[256][0] == 129


def test_pipeline_arguments_are_checked() -> None:
    with pytest.raises(LocalProtocolError):
        _Pipeline(0, None, None)
    with pytest.raises(LocalProtocolError):
        _Pipeline(8, 4096, None)  # a budget needs sizes
    with pytest.raises(LocalProtocolError):
        _Pipeline(8, 0, len)


# -- BulkError ---------------------------------------------------------------------------------


def test_bulk_error_names_the_first_real_error_and_what_was_done() -> None:
    refused, lost, unsent = JobwireError("refused"), ConnectionLost("lost"), NotSent("not sent")
    results: list[object] = [11, 12, refused, lost, unsent]
    with pytest.raises(BulkError) as info:
        BulkError.check(results)
    error = info.value
    assert error.error is refused and error.index == 2 and error.__cause__ is refused
    assert error.done == [(0, 11), (1, 12)] and error.results == results
    assert "3 of 5 items failed" in str(error) and "item 2" in str(error)
    BulkError.check([1, None, "x"])  # nothing failed: nothing raised
    with pytest.raises(ValueError):
        BulkError([1, 2])


# -- a failed session takes no more bytes ------------------------------------------------------


def _sessions() -> list[tuple[str, Any, list[Any], bytes]]:
    """(name, session, its Pendings, the bytes that would have answered them) per protocol."""
    from beanstalk_client._commands import Put
    from beanstalk_client._session import Session as BeanstalkSession
    from gearman_client import _packets as pk
    from gearman_client._session import GearmanSession
    from qless_client._redis import RedisSession
    from workq_client._commands import Delete
    from workq_client._session import WorkqSession

    job = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"
    beanstalk, gearman, workq, redis = (
        BeanstalkSession(), GearmanSession(), WorkqSession(), RedisSession()
    )
    echo = pk.encode_packet(pk.EchoRes(b"x"), pk.RES)
    return [
        ("beanstalk", beanstalk, [beanstalk.submit(Put(b"x")) for _ in range(2)],
         b"INSERTED 1\r\nINSERTED 2\r\n"),
        ("beanstalk, one line", (s := BeanstalkSession()), [s.submit(Put(b"x"))],
         b"INSERTED 1\r\n"),
        ("gearman", gearman, [gearman.request(pk.EchoReq(b"x")) for _ in range(2)], echo * 2),
        ("workq", workq, [workq.submit(Delete(job)) for _ in range(2)], b"+OK\r\n" * 2),
        ("redis", redis, [redis.submit(["PING"]) for _ in range(2)], b"+PONG\r\n" * 2),
    ]


@pytest.mark.parametrize("case", range(5))
def test_bytes_that_arrive_after_the_session_failed_are_dropped(case: int) -> None:
    """A send fails (the session fails every request) while the reader still holds replies
    from before: feeding them must not complete anything, nor raise (it raised IndexError
    from the empty FIFO while beanstalkd was SIGKILLed under a worker)."""
    name, session, pendings, replies = _sessions()[case]
    session.data_to_send()
    session.fail(ConnectionLost("send failed: broken pipe"))
    session.receive_data(replies)
    assert all(type(p.error) is ConnectionLost for p in pendings), name
    assert isinstance(session.broken, ConnectionLost)
