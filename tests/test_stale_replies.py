"""A reply that arrives before any request answers nothing (issue 19).

A scripted server sends a reply as soon as it accepts the connection, before the client has
sent a byte. Before the fix it was credited to the next call (a stale beanstalk job id, a Redis
``PING`` answered ``42``, a Workq ``delete`` "done"). Now the transport reads what arrived
while nothing was in flight before it sends the next request, and the protocol's core refuses
it: the call raises ``RemoteProtocolError``, its request is never sent, and the connection is
failed. A RESP3 push in the same place is not a reply: it goes to ``on_push`` and the call
goes on.

Each test waits until the stale bytes are readable on the client's socket (the observable
state that makes the race deterministic) before it calls.
"""

from __future__ import annotations

import select
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import beanstalk_client
import qless_client
import workq_client
from jobwire.errors import RemoteProtocolError

from .hostile import Hostile, peer_server


@contextmanager
def early_server(first: bytes, then: Callable[[bytes], bytes] | None = None) -> Iterator[Hostile]:
    """A server that sends ``first`` on accepting a connection, then answers each read with
    ``then(received)`` (nothing when ``then`` is None), recording what it received."""

    def handle(conn: socket.socket, state: Hostile) -> None:
        conn.sendall(first)
        state.sent += len(first)
        while chunk := conn.recv(65536):
            state.received.append(chunk)
            if then is not None:
                conn.sendall(then(chunk))
        state.closed.set()

    with peer_server(handle) as state:
        yield state


def wait_readable(obj: Any) -> None:
    """Until the client's socket holds the early bytes (a test-only look inside)."""
    stream = obj._transport._stream
    assert stream is not None, "not connected"
    readable, _, _ = select.select([stream._sock], [], [], 10)
    assert readable, "the early bytes never arrived"


# -- sync clients --------------------------------------------------------------------------------


#: system: (the early reply, how to build a client on a port, one call that would take it).
Case = tuple[bytes, Callable[[int], Any], Callable[[Any], Any]]

CASES: dict[str, Case] = {
    "beanstalk": (b"INSERTED 42\r\n", lambda port: beanstalk_client.Client(("127.0.0.1", port)),
                  lambda client: client.put(b"job")),
    "workq": (b"+OK\r\n", lambda port: workq_client.Client(("127.0.0.1", port)),
              lambda client: client.delete(str(uuid.uuid4()))),
    "redis": (b":42\r\n", lambda port: qless_client.Redis(("127.0.0.1", port)),
              lambda client: client.execute("PING")),
}


@pytest.mark.parametrize("system", sorted(CASES))
def test_sync_reply_before_any_request(system: str) -> None:
    early, build, call = CASES[system]
    with early_server(early) as server:
        client = build(server.port)
        try:
            wait_readable(client)
            with pytest.raises(RemoteProtocolError, match="no command awaiting"):
                call(client)  # before: 42 (beanstalk, Redis) or None (Workq)
            assert server.wait_closed()  # the connection is dropped ...
            assert server.received == []  # ... and the request was never sent
        finally:
            client.close()


# -- async clients -------------------------------------------------------------------------------


ASYNC_CASES: dict[str, Case] = {
    "beanstalk": (b"INSERTED 42\r\n",
                  lambda port: beanstalk_client.AsyncClient(("127.0.0.1", port)),
                  lambda client: client.put(b"job")),
    "workq": (b"+OK\r\n", lambda port: workq_client.AsyncClient(("127.0.0.1", port)),
              lambda client: client.delete(str(uuid.uuid4()))),
    "redis": (b":42\r\n", lambda port: qless_client.AsyncRedis(("127.0.0.1", port)),
              lambda client: client.execute("PING")),
}


@pytest.mark.anyio
@pytest.mark.parametrize("system", sorted(ASYNC_CASES))
async def test_async_reply_before_any_request(system: str) -> None:
    early, build, call = ASYNC_CASES[system]
    with early_server(early) as server:
        client = build(server.port)
        try:
            await client.connect()
            wait_readable(client)
            with pytest.raises(RemoteProtocolError, match="no command awaiting"):
                await call(client)
            assert server.wait_closed()
            assert server.received == []
        finally:
            await client.aclose()


@pytest.mark.anyio
async def test_async_reply_after_the_last_answer_is_not_credited_to_the_next_call() -> None:
    # The server answers one PING, then sends a stray reply while the client is idle.
    answered = threading.Event()

    def handle(conn: socket.socket, state: Hostile) -> None:
        assert conn.recv(65536) == b"*1\r\n$4\r\nPING\r\n"
        conn.sendall(b"+PONG\r\n")
        answered.wait(10)
        conn.sendall(b":42\r\n")
        while chunk := conn.recv(65536):
            state.received.append(chunk)
        state.closed.set()

    with peer_server(handle) as server:
        async with qless_client.AsyncRedis(("127.0.0.1", server.port)) as redis:
            assert await redis.execute("PING") == "PONG"
            answered.set()
            wait_readable(redis)
            with pytest.raises(RemoteProtocolError, match="no command awaiting"):
                await redis.execute("PING")
        assert server.received == []


def test_sync_reply_after_the_last_answer_is_not_credited_to_the_next_call() -> None:
    answered = threading.Event()

    def handle(conn: socket.socket, state: Hostile) -> None:
        assert conn.recv(65536).startswith(b"put ")
        conn.sendall(b"INSERTED 1\r\n")
        answered.wait(10)
        conn.sendall(b"INSERTED 2\r\n")
        while chunk := conn.recv(65536):
            state.received.append(chunk)
        state.closed.set()

    with peer_server(handle) as server, beanstalk_client.Client(("127.0.0.1", server.port)) as c:
        assert c.put(b"job") == 1
        answered.set()
        wait_readable(c)
        with pytest.raises(RemoteProtocolError, match="no command awaiting"):
            c.put(b"job")  # before: 2
        assert server.wait_closed()
        assert server.received == []


# -- a push is not a reply -----------------------------------------------------------------------

HELLO_REPLY = b"%1\r\n+proto\r\n:3\r\n"
PUSH = b">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n"


def push_server(answered: threading.Event) -> Callable[[socket.socket, Hostile], None]:
    """Answers HELLO 3, sends a push once ``answered`` is set, then answers PING."""

    def handle(conn: socket.socket, state: Hostile) -> None:
        assert conn.recv(65536).startswith(b"*2\r\n$5\r\nHELLO")
        conn.sendall(HELLO_REPLY)
        answered.wait(10)
        conn.sendall(PUSH)
        while chunk := conn.recv(65536):
            state.received.append(chunk)
            conn.sendall(b"+PONG\r\n")
        state.closed.set()

    return handle


def test_push_while_idle_goes_to_on_push_and_the_call_goes_on() -> None:
    pushes: list[Any] = []
    answered = threading.Event()
    with peer_server(push_server(answered)) as server, qless_client.Redis(
        ("127.0.0.1", server.port), protocol=3, on_push=pushes.append
    ) as redis:
        answered.set()
        wait_readable(redis)
        assert redis.execute("PING") == "PONG"
        assert [p.kind for p in pushes] == ["invalidate"]


@pytest.mark.anyio
async def test_async_push_while_idle_goes_to_on_push_and_the_call_goes_on() -> None:
    pushes: list[Any] = []
    answered = threading.Event()
    with peer_server(push_server(answered)) as server:
        async with qless_client.AsyncRedis(("127.0.0.1", server.port), protocol=3,
                                           on_push=pushes.append) as redis:
            answered.set()
            wait_readable(redis)
            assert await redis.execute("PING") == "PONG"
            assert [p.kind for p in pushes] == ["invalidate"]


# -- the session alone (no I/O) ------------------------------------------------------------------


def test_receive_early_refuses_a_reply_and_keeps_a_push() -> None:
    from qless_client._redis import RedisSession
    from qless_client._resp import Push

    pushes: list[Push] = []
    session = RedisSession(on_push=pushes.append)
    ping = session.submit(["PING"])
    session.receive_early(PUSH)  # no reply: the push is dispatched, PING still awaits
    assert [p.kind for p in pushes] == ["invalidate"] and not ping.done
    assert session.conn.pending == 1
    session.receive_data(b"+PONG\r\n")
    assert ping.result() == "PONG" and session.idle

    stale = RedisSession()
    ping = stale.submit(["PING"])
    stale.receive_early(b":42\r\n")
    with pytest.raises(RemoteProtocolError, match="no command awaiting"):
        ping.result()
    assert isinstance(stale.broken, RemoteProtocolError)
