"""What a hostile or broken beanstalk server cannot do to the client: numbers in stats documents
are read strictly (typed errors, never a ``ValueError`` or an ``inf``), and ``call_many``
raises a :class:`~jobwire.errors.BulkError` for commands that got no reply."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from beanstalk_client import (
    AsyncClient,
    BulkError,
    Client,
    ConnectionLost,
    Delete,
    Inserted,
    NotFound,
    Put,
    RemoteProtocolError,
)
from beanstalk_client._events import DELETED
from beanstalk_client._stats import parse_server_stats
from jobwire.errors import NotSent

from ..hostile import Hostile, hostile_server, peer_server

BIG = b"9" * 5000  # past Python's 4,300-digit int() limit


def stats_reply(line: bytes) -> bytes:
    document = b"---\ncurrent-jobs-ready: 0\n" + line + b"\n"
    return b"OK %d\r\n%s\r\n" % (len(document), document)


BAD_STATS = [
    pytest.param(b"current-jobs-urgent: " + BIG, id="5000-digits"),
    pytest.param(b"rusage-utime: " + BIG + b".000001", id="5000-digit-float"),
    pytest.param(b"rusage-stime: 1e5", id="exponent"),
    pytest.param(b"pid: \xc2\xb2", id="superscript-two"),
    pytest.param(b"pid: 1_0", id="underscore"),
]


@pytest.mark.parametrize("line", BAD_STATS)
def test_stats_numbers_are_strict(line: bytes) -> None:
    reply = stats_reply(line)
    with pytest.raises(RemoteProtocolError):
        parse_server_stats(reply[reply.index(b"\n") + 1 : -2])
    with (
        hostile_server(lambda _: [reply]) as peer,
        Client("127.0.0.1", peer.port) as client,
        pytest.raises(RemoteProtocolError),
    ):
        client.stats()


@pytest.mark.anyio
async def test_async_stats_numbers_are_strict() -> None:
    reply = stats_reply(b"total-jobs: " + BIG)
    with hostile_server(lambda _: [reply]) as peer:
        async with AsyncClient.from_url(f"beanstalk://127.0.0.1:{peer.port}") as client:
            with pytest.raises(RemoteProtocolError):
                await client.stats()


def test_stats_numbers_in_range_still_parse() -> None:
    stats = parse_server_stats(b"---\npid: 18446744073709551615\nrusage-utime: 12.345678\n")
    assert stats["pid"] == 2**64 - 1 and stats["rusage-utime"] == 12.345678


# -- call_many -------------------------------------------------------------------------------------

PUTS = [Put(body) for body in (b"a", b"b", b"c", b"d")]


def answers_one_put_then_closes(conn: socket.socket, state: Hostile) -> None:
    received = b""
    while not received.endswith(b"d\r\n"):  # every put, so that closing sends no reset
        chunk = conn.recv(65536)
        if not chunk:
            return
        received += chunk
    conn.sendall(b"INSERTED 1\r\n")
    conn.shutdown(socket.SHUT_WR)
    while conn.recv(65536):
        pass


def check_bulk(error: BaseException) -> None:
    assert isinstance(error, BulkError)
    assert error.results[0] == Inserted(1) and error.done == [(0, Inserted(1))]
    assert error.index == 1 and isinstance(error.error, ConnectionLost)
    assert all(isinstance(r, (ConnectionLost, NotSent)) for r in error.results[1:])
    assert error.__cause__ is error.error


def test_call_many_raises_bulk_error_for_commands_without_a_reply() -> None:
    with (
        peer_server(answers_one_put_then_closes) as peer,
        Client("127.0.0.1", peer.port, timeout=5) as client,
        pytest.raises(BulkError) as info,
    ):
        client.call_many(PUTS)
    check_bulk(info.value)


@pytest.mark.anyio
async def test_async_call_many_raises_bulk_error_for_commands_without_a_reply() -> None:
    with peer_server(answers_one_put_then_closes) as peer:
        async with AsyncClient.from_url(f"beanstalk://127.0.0.1:{peer.port}", timeout=5) as client:
            with pytest.raises(BulkError) as info:
                await client.call_many(PUTS)
    check_bulk(info.value)


def test_call_many_returns_refusals_as_entries() -> None:
    script: Any = lambda _: [b"NOT_FOUND\r\nDELETED\r\n"]  # noqa: E731
    with (
        hostile_server(script, wait_for=b"delete 2\r\n") as peer,
        Client("127.0.0.1", peer.port, timeout=5) as client,
    ):
        not_found, deleted = client.call_many([Delete(1), Delete(2)])
    assert isinstance(not_found, NotFound) and deleted == DELETED
