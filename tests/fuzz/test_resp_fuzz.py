"""Fuzzing the RESP2/RESP3 client core (``qless_client._resp``), its only role: qless talks to a
real Redis, so there is no server-role core (what is checked: ``harness.py``).

The core is built with small caps here (max_bulk 4096, max_line 1024, max_depth 8, max_array 64,
max_reply_items 512, max_reply_bytes 12288) so that inputs of a few KiB reach every one of them.
Inputs: the corpus recorded from redis-server 7 (RESP2, and RESP3 after HELLO 3: every type through
DEBUG PROTOCOL), mutated, token soups, random bytes, and values over the caps.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobwire.errors import RemoteProtocolError
from qless_client._resp import (
    DEFAULT_MAX_BULK,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MAX_REPLY_ITEMS,
    Connection,
    Reply,
)

from .harness import (
    RESP_CAPS,
    RESP_CLIENT,
    Entry,
    canonical,
    check,
    load_corpus,
    random_cuts,
    resp_command_count,
    resp_inspect,
)
from .strategies import chunkings, fuzz_settings, mutated, token_soup

CORPUS = load_corpus("resp")
PING = b"*1\r\n$4\r\nPING\r\n"


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) >= 10
    every_type = b"".join(entry.server for entry in CORPUS)
    for start in (b"\r\n+", b"\r\n-", b"\r\n:", b"\r\n$", b"\r\n*", b"\r\n_", b"\r\n#",
                  b"\r\n,", b"\r\n(", b"\r\n=", b"\r\n%", b"\r\n~", b"\r\n|", b"\r\n>"):
        assert start in every_type, start


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_corpus_replays_without_errors(entry: Entry) -> None:
    outcome = check(RESP_CLIENT, entry.server, entry.client)
    assert outcome.error is None
    replies = [e for e in outcome.events if e.startswith(("Reply:", "ErrorReply:"))]
    assert len(replies) == resp_command_count(entry.client)


@fuzz_settings(400)
@given(case=mutated("resp", "server"), data=st.data())
def test_mutated_replies(case: tuple[bytes, Entry], data: st.DataObject) -> None:
    raw, entry = case
    check(RESP_CLIENT, raw, entry.client, [data.draw(chunkings(raw))])


@fuzz_settings(300)
@given(raw=token_soup("resp"), data=st.data())
def test_token_soup(raw: bytes, data: st.DataObject) -> None:
    check(RESP_CLIENT, raw, PING * 20, [data.draw(chunkings(raw))])


@fuzz_settings(120)
@given(raw=st.binary(max_size=1024), data=st.data())
def test_random_bytes(raw: bytes, data: st.DataObject) -> None:
    check(RESP_CLIENT, raw, PING * 20, [data.draw(chunkings(raw))])


# Type bytes, lengths and scalars in any order: deep, wide and malformed aggregates.
_value_lines = st.sampled_from([
    b"*1", b"*2", b"*-1", b"*0", b"%1", b"~2", b"|1", b">2", b"$1\r\nx", b"$0\r\n", b"$-1",
    b":1", b":-0", b"(123456789012345678901234567890", b",1.5", b",inf", b",-nan", b"#t", b"_",
    b"+OK", b"-ERR x", b"=7\r\ntxt:abc", b"!3\r\nERR", b"*65", b"$4097", b"*?", b":+1", b",1e",
    b"*64", b"~64", b"%32", b"$4000\r\n" + b"y" * 4000,
])


@fuzz_settings(300)
@given(lines=st.lists(_value_lines, max_size=40), data=st.data())
def test_aggregate_soup(lines: list[bytes], data: st.DataObject) -> None:
    raw = b"".join(line + b"\r\n" for line in lines)
    check(RESP_CLIENT, raw, PING * 20, [data.draw(chunkings(raw))])


def test_a_set_holding_nan_compares_in_any_order() -> None:
    # Found by test_aggregate_soup: a set's iteration order can differ between two equal sets
    # (NaN hashes by identity), so the harness compares sets member by member, sorted.
    raw = b"~2\r\n*0\r\n~2\r\n,1.5\r\n,-nan\r\n"
    outcome = check(RESP_CLIENT, raw, PING)
    assert outcome.events[0] == "Reply:Reply(value=set({frozenset({1.5, nan}), tuple()}))"


# Over the caps: each refused at its header or once the line passes max_line, before any more
# of it is buffered.
@pytest.mark.parametrize(
    "raw",
    [
        b"+" + b"x" * 5000,
        b"-" + b"e\n" * 2000,
        b"$%d\r\n" % (RESP_CAPS["max_bulk"] + 1) + b"x" * 9000,
        b"$4000\r\n" + b"x" * 9000,
        b"*%d\r\n" % (RESP_CAPS["max_array"] + 1) + b":1\r\n" * 200,
        b"%%%d\r\n" % (RESP_CAPS["max_array"] + 1) + b":1\r\n" * 200,
        b"*1\r\n" * (RESP_CAPS["max_depth"] + 1) + b":1\r\n",
        b">1\r\n*1\r\n" * 4 + b">1\r\n",
        b"(" + b"9" * 5000 + b"\r\n",
        b"*8\r\n" + (b"*64\r\n" + b"~0\r\n" * 64) * 8,
        b"*4\r\n" + (b"$4000\r\n" + b"x" * 4000 + b"\r\n") * 4,
    ],
    ids=["long-line", "long-error", "big-bulk", "bulk-without-crlf", "wide-array", "wide-map",
         "deep", "push-inside-a-value", "long-big-number", "many-values-in-all",
         "many-bytes-in-all"],
)
def test_refuses_input_over_the_caps(raw: bytes) -> None:
    rng = random.Random(raw)
    error = check(RESP_CLIENT, raw, PING, [random_cuts(raw, rng) for _ in range(3)]).error
    assert error is not None and issubclass(error, RemoteProtocolError)


def test_a_big_number_past_the_int_limit_is_a_protocol_error() -> None:
    # Python refuses int() of more than 4,300 digits with ValueError; the core must turn that
    # into its own error (the default max_line leaves room for 64 KiB of digits).
    raw = b"(" + b"7" * 5000 + b"\r\n"
    conn = Connection()
    conn.send(["PING"])
    conn.receive_data(raw)
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


# With the default caps a value of 64 KiB or more takes the core's other path (copied out of the
# buffer once, its CRLF checked apart): the same checks, in random chunkings.
DEFAULT_CAPS = dataclasses.replace(
    RESP_CLIENT,
    name="resp-client-default-caps",
    make=lambda context: _pinged(Connection(), 4),
    bound=DEFAULT_MAX_BULK + 2,
    inspect=resp_inspect(DEFAULT_MAX_REPLY_ITEMS, DEFAULT_MAX_REPLY_BYTES),
)


def _pinged(conn: Connection, n: int) -> Connection:
    for _ in range(n):
        conn.send(["PING"])
    return conn


@pytest.mark.parametrize("size", [65535, 65536, 200_000])
@pytest.mark.parametrize("tail", [b"\r\n", b"\n\r", b"x"])
def test_large_bulk_strings_in_any_chunking(size: int, tail: bytes) -> None:
    value = random.Random(size).randbytes(size)
    raw = b"$%d\r\n%b%b:1\r\n" % (size, value, tail)
    rng = random.Random(tail + bytes(size))
    outcome = check(DEFAULT_CAPS, raw, b"", [random_cuts(raw, rng) for _ in range(4)],
                    bytewise_limit=0)
    if tail == b"\r\n":
        assert outcome.events[0] == f"Reply:{canonical(Reply(value))}"
        assert outcome.error is None
    else:
        assert outcome.error is RemoteProtocolError
