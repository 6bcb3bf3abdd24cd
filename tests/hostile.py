"""A hostile server on loopback, shared by the ``test_hostile_server.py`` files: it answers the
first command of each connection with scripted bytes (possibly many megabytes that never
complete the reply), then stays silent, and records what it sent and whether the client closed
the connection. No real server misbehaves like this on purpose; a compromised or buggy one may.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field


@dataclass
class Hostile:
    """What the server saw. ``port`` to connect to."""

    port: int = 0
    #: Bytes sent, over every connection.
    sent: int = 0
    #: Bytes received before the first reply, per connection.
    received: list[bytes] = field(default_factory=list)
    #: Set once a client closed its end (end of input or a reset seen by the server).
    closed: threading.Event = field(default_factory=threading.Event)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """Whether the client closed a connection within ``timeout`` seconds."""
        return self.closed.wait(timeout)


@contextmanager
def peer_server(handle: Callable[[socket.socket, Hostile], None]) -> Iterator[Hostile]:
    """Accept connections on a free loopback port and run ``handle(conn, state)`` on each in a
    thread; an ``OSError`` there (a reset: the client closed with bytes unread) marks the
    connection closed by the client."""
    state = Hostile()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    state.port = listener.getsockname()[1]
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve(conn: socket.socket) -> None:
        try:
            handle(conn, state)
        except OSError:
            if not stop.is_set():
                state.closed.set()

    def accept() -> None:
        listener.settimeout(0.05)  # so that the loop sees ``stop`` soon
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            conns.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for conn in conns:
            with suppress(OSError):
                conn.close()


@contextmanager
def hostile_server(
    script: Callable[[bytes], Iterable[bytes]], *, wait_for: bytes = b"\n"
) -> Iterator[Hostile]:
    """A :func:`peer_server` whose connections each read until ``wait_for`` arrives, send every
    chunk of ``script(received)``, then read (and drop) until the client closes."""

    def handle(conn: socket.socket, state: Hostile) -> None:
        received = b""
        while wait_for not in received:
            chunk = conn.recv(65536)
            if not chunk:
                state.closed.set()
                return
            received += chunk
        state.received.append(received)
        for chunk in script(received):
            conn.sendall(chunk)
            state.sent += len(chunk)
        while conn.recv(65536):
            pass
        state.closed.set()

    with peer_server(handle) as state:
        yield state


def repeat(chunk: bytes, total: int) -> Iterator[bytes]:
    """``chunk`` repeated in writes of about 64 KiB until ``total`` bytes."""
    block = chunk * max(1, 65536 // len(chunk))
    sent = 0
    while sent < total:
        yield block
        sent += len(block)
