"""Fuzzing the Workq cores, both roles (what is checked: ``harness.py``).

The client role reads replies (``workq_client._protocol.Connection``, built with max_fields 32
and max_record_size 4096 here); the server role reads commands
(``workq_client._server_protocol.ServerConnection``). Inputs: the corpus recorded from Workq 0.2.0,
mutated, token soups, random bytes, and lines and data blocks over the caps. Inputs stay small:
the client reads ``inspect server`` records field by field.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import workq_client._commands as wc
from jobwire.errors import RemoteProtocolError

from .harness import (
    ROLES,
    WORKQ_CLIENT,
    WORKQ_DEFAULT,
    WORKQ_MAX_FIELDS,
    WORKQ_SERVER,
    Entry,
    Role,
    check,
    load_corpus,
    random_cuts,
    role_input,
)
from .strategies import chunkings, fuzz_settings, mutated, requests, token_soup

CORPUS = load_corpus("workq")


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
@pytest.mark.parametrize("role", ROLES["workq"], ids=lambda r: r.name)
def test_corpus_replays_without_errors(role: Role, entry: Entry) -> None:
    data, context = role_input(role, entry)
    assert check(role, data, context).error is None


@fuzz_settings(300)
@given(case=mutated("workq", "server"), data=st.data())
def test_client_role_mutated_replies(case: tuple[bytes, Entry], data: st.DataObject) -> None:
    raw, entry = case
    check(WORKQ_CLIENT, raw, entry.client, [data.draw(chunkings(raw))])


@fuzz_settings(200)
@given(raw=token_soup("workq"), context=requests(WORKQ_DEFAULT), data=st.data())
def test_client_role_token_soup(raw: bytes, context: bytes, data: st.DataObject) -> None:
    check(WORKQ_CLIENT, raw, context, [data.draw(chunkings(raw))])


@fuzz_settings(300)
@given(case=mutated("workq", "client"), data=st.data())
def test_server_role_mutated_commands(case: tuple[bytes, Entry], data: st.DataObject) -> None:
    raw, _ = case
    check(WORKQ_SERVER, raw, b"", [data.draw(chunkings(raw))])


@fuzz_settings(200)
@given(raw=token_soup("workq"), data=st.data())
def test_server_role_token_soup(raw: bytes, data: st.DataObject) -> None:
    check(WORKQ_SERVER, raw, b"", [data.draw(chunkings(raw))])


@fuzz_settings(120)
@given(raw=st.binary(max_size=1024), context=requests(WORKQ_DEFAULT), data=st.data())
def test_both_roles_random_bytes(raw: bytes, context: bytes, data: st.DataObject) -> None:
    cuts = [data.draw(chunkings(raw))]
    check(WORKQ_CLIENT, raw, context, cuts)
    check(WORKQ_SERVER, raw, b"", cuts)


# Over the caps. The client refuses a line past 64 KiB, a data block or payload announced over
# 1 MiB, more records than the command asked for, a record with more than max_fields keys.
@pytest.mark.parametrize(
    ("raw", "context"),
    [
        (b"+OK 1\r\n" + b"x" * 70_000, b"lease q 0\r\n"),
        (b"-CLIENT-ERROR " + b"x\n" * 35_000, b"delete %s\r\n" % wc.new_id().encode()),
        (b"+OK 1\r\n%s q 1 %d\r\n" % (wc.new_id().encode(), wc.MAX_PAYLOAD + 1), b"lease q 0\r\n"),
        (b"+OK 4\r\n", b"inspect queues 0 3\r\n"),
        (b"+OK 1\r\nq %d\r\n" % (WORKQ_MAX_FIELDS + 1), b"inspect queue q\r\n"),
        (b"+OK 1\r\nserver 2\r\n" + b"k v\r\n" * (WORKQ_MAX_FIELDS + 1), b"inspect server\r\n"),
        (b"+OK 1\r\nq 3\r\npayload-size 5000\r\npayload ", b"inspect queue q\r\n"),
        (b"+OK 1\r\nq 3\r\nk " + b"v" * 5000 + b"\r\n", b"inspect queue q\r\n"),
    ],
    ids=["long-line", "long-error-line", "big-data-block", "too-many-records", "too-many-keys",
         "endless-server-record", "big-payload", "big-record"],
)
def test_client_role_refuses_input_over_the_caps(raw: bytes, context: bytes) -> None:
    rng = random.Random(raw)
    cuts = [random_cuts(raw, rng) for _ in range(3)]
    error = check(WORKQ_CLIENT, raw, context, cuts, bytewise_limit=8192).error
    assert error is not None and issubclass(error, RemoteProtocolError)


# The server role closes the connection on a command line past 64 KiB and discards a data block
# announced over 1 MiB: it never holds more than the caps.
@pytest.mark.parametrize(
    "raw",
    [
        b"lease " + b"q" * 70_000,
        b"add %s q 1 1 %d\r\n" % (wc.new_id().encode(), wc.MAX_PAYLOAD + 1) + b"x" * 70_000,
        b"complete %s 100\r\n" % wc.new_id().encode() + b"y" * 70_000,
    ],
    ids=["long-line", "too-big-payload", "short-payload"],
)
def test_server_role_stays_within_the_caps(raw: bytes) -> None:
    rng = random.Random(raw)
    check(WORKQ_SERVER, raw, b"", [random_cuts(raw, rng) for _ in range(3)], bytewise_limit=0)


def test_server_role_closes_for_the_same_reason_in_any_chunking() -> None:
    raw = b"\n" + b"x" * 65535  # minimal: any LF, then enough bytes to reach the line cap
    check(WORKQ_SERVER, raw, b"", [[raw[:1], raw[1:]]], bytewise_limit=0)
