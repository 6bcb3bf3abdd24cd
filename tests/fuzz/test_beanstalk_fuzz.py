"""Fuzzing the beanstalk cores, both roles (what is checked: ``harness.py``).

The client role reads replies (``beanstalk_client._protocol.Connection``, max_body_size 4096 here);
the server role reads commands (``beanstalk_client._server_protocol.ServerConnection``,
max_job_size 1024 as the transcript's beanstalkd). Inputs: the real-server corpus as recorded,
mutated, token soups, random bytes, and lines or bodies over the caps.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobwire.errors import RemoteProtocolError

from .harness import (
    BEANSTALK_CLIENT,
    BEANSTALK_DEFAULT,
    BEANSTALK_MAX_BODY,
    BEANSTALK_SERVER,
    ROLES,
    Entry,
    Role,
    check,
    load_corpus,
    role_input,
)
from .strategies import (
    chunkings,
    fuzz_settings,
    mutated,
    oversized,
    requests,
    token_soup,
)

CORPUS = load_corpus("beanstalk")


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) >= 30
    assert all(entry.client for entry in CORPUS)


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
@pytest.mark.parametrize("role", ROLES["beanstalk"], ids=lambda r: r.name)
def test_corpus_replays_without_errors(role: Role, entry: Entry) -> None:
    data, context = role_input(role, entry)
    assert check(role, data, context).error is None


@fuzz_settings(300)
@given(case=mutated("beanstalk", "server"), data=st.data())
def test_client_role_mutated_replies(case: tuple[bytes, Entry], data: st.DataObject) -> None:
    raw, entry = case
    check(BEANSTALK_CLIENT, raw, entry.client, [data.draw(chunkings(raw))])


@fuzz_settings(200)
@given(raw=token_soup("beanstalk"), context=requests(BEANSTALK_DEFAULT), data=st.data())
def test_client_role_token_soup(raw: bytes, context: bytes, data: st.DataObject) -> None:
    check(BEANSTALK_CLIENT, raw, context, [data.draw(chunkings(raw))])


@fuzz_settings(300)
@given(case=mutated("beanstalk", "client"), data=st.data())
def test_server_role_mutated_commands(case: tuple[bytes, Entry], data: st.DataObject) -> None:
    raw, _ = case
    check(BEANSTALK_SERVER, raw, b"", [data.draw(chunkings(raw))])


@fuzz_settings(200)
@given(raw=token_soup("beanstalk"), data=st.data())
def test_server_role_token_soup(raw: bytes, data: st.DataObject) -> None:
    check(BEANSTALK_SERVER, raw, b"", [data.draw(chunkings(raw))])


@fuzz_settings(120)
@given(raw=st.binary(max_size=1024), context=requests(BEANSTALK_DEFAULT), data=st.data())
def test_both_roles_random_bytes(raw: bytes, context: bytes, data: st.DataObject) -> None:
    cuts = [data.draw(chunkings(raw))]
    check(BEANSTALK_CLIENT, raw, context, cuts)
    check(BEANSTALK_SERVER, raw, b"", cuts)


# Over the caps: a reply line past 224 bytes, a body announced over max_body_size, a body that
# runs past its size; the client refuses each (and never buffers more than the cap meanwhile).
@fuzz_settings(60)
@given(
    raw=st.one_of(
        oversized([b"", b"INSERTED ", b"RESERVED 1 ", b"OK 1"], b"abz019 -\r\t\x00", 600),
        oversized([b"RESERVED 1 %d\r\n" % BEANSTALK_MAX_BODY, b"OK 4000\r\n"], b"ab\r", 6000),
        st.integers(BEANSTALK_MAX_BODY + 1, 10**20).map(lambda n: b"FOUND 3 %d\r\n" % n),
    ),
    data=st.data(),
)
def test_client_role_refuses_input_over_the_caps(raw: bytes, data: st.DataObject) -> None:
    context = b"reserve\r\nstats\r\npeek 3\r\n"
    outcome = check(BEANSTALK_CLIENT, raw, context, [data.draw(chunkings(raw))])
    assert outcome.error is RemoteProtocolError


# The server role never refuses: it throws over-long lines away 224 bytes at a time, as
# beanstalkd does, and discards a too-big put's body, so what it holds stays under the caps.
@fuzz_settings(60)
@given(
    raw=st.one_of(
        oversized([b"", b"put 0 0 1 ", b"use "], b"abz019 -\r\t\x00", 2000),
        oversized([b"put 0 0 1 1000\r\n", b"put 0 0 1 99999\r\n"], b"ab\r\n", 4000),
    ),
    data=st.data(),
)
def test_server_role_stays_within_the_caps(raw: bytes, data: st.DataObject) -> None:
    check(BEANSTALK_SERVER, raw, b"", [data.draw(chunkings(raw))])
