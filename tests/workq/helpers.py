"""Small real servers that misbehave, for the clients' error paths (real sockets, no mocks)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress


@contextmanager
def tcp_server(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """Accept connections on a free loopback port and run ``handle`` on each in a thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    stop = threading.Event()
    conns: list[socket.socket] = []

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            threading.Thread(target=_run, args=(handle, conn), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        listener.close()
        for conn in conns:
            conn.close()


def _run(handle: Callable[[socket.socket], None], conn: socket.socket) -> None:
    with suppress(OSError):
        handle(conn)


def silent(conn: socket.socket) -> None:
    """Read and never answer."""
    while conn.recv(65536):
        pass


def replies(data: bytes, close: bool = False) -> Callable[[socket.socket], None]:
    """Answer the first command with ``data`` (then close, if asked)."""

    def handle(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(data)
        if close:
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            return
        while conn.recv(65536):
            pass

    return handle
