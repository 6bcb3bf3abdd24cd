"""Misbehaving servers on loopback: they answer with scripted bytes, to test the clients'
handling of garbage, truncated replies, silence and abrupt closes (no real server does these
on purpose)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def scripted_server(
    reply: bytes, *, close: bool = True, wait_for: bytes = b"\r\n"
) -> Iterator[int]:
    """Accept one connection, read until ``wait_for`` arrives, send ``reply``, then close (or
    stay silent and open until the test ends). Yields the port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    done = threading.Event()

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            received = b""
            while wait_for not in received:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                received += chunk
            if reply:
                conn.sendall(reply)
            if not close:
                done.wait(10)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        done.set()
        listener.close()
        thread.join(5)
