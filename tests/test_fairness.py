"""One flooding connection must not keep the others waiting (issue 19): each bundled server runs
one connection's commands for a bounded turn (``jobwire._serving.Turn``: at most ``TURN``
commands or ``TURN_SECONDS``) before the others get a turn (the connection waits on the loop's
"ready again" list meanwhile).

Each test fills connection A's socket with K pipelined commands while the server is stopped
(SIGSTOP), lets it go (SIGCONT), and once A's first replies arrive (the server is busy with
A) sends one command on connection B. A's replies are read as fast as they come, so nothing
makes the server wait on A: before the fix it answered all K of A's commands before it read
B's (measured: K of K, every run, on all three servers). The check is an order, not a time:
when B's answer arrives, A has had fewer than half of its K replies (with the rule, one or two
reads' worth: 200-8,200 in our runs).

The servers run as subprocesses (``jobwire.testing``), as they ship.
"""

from __future__ import annotations

import contextlib
import selectors
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest

from jobwire import _serving as serving
from jobwire.testing import start_beanstalk, start_gearman, start_workq
from tests.waiting import wait_until

#: Commands A floods with (0.4-2.3 MB: the kernel holds them all while the server is stopped).
K = 50_000


def _echo(kind: int, magic: bytes) -> bytes:
    return magic + struct.pack(">II", kind, 0)  # ECHO_REQ / ECHO_RES with no data


class Started(Protocol):
    """What ``jobwire.testing``'s ``start_*`` return."""

    host: str
    port: int
    proc: subprocess.Popen[bytes] | None

    def stop(self) -> None: ...


#: name: (start, one command, its reply: fixed-size, so A's replies are counted by bytes)
SERVERS: dict[str, tuple[Callable[[], Started], bytes, bytes]] = {
    "beanstalk": (lambda: start_beanstalk("bundled"), b"peek 1\r\n", b"NOT_FOUND\r\n"),
    "gearman": (lambda: start_gearman("bundled"), _echo(16, b"\0REQ"), _echo(17, b"\0RES")),
    "workq": (lambda: start_workq(),
              b"delete 00000000-0000-4000-8000-000000000000\r\n", b"-NOT-FOUND\r\n"),
}


def _connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _round_trip(sock: socket.socket, command: bytes, reply: bytes) -> None:
    sock.sendall(command)
    data = b""
    while len(data) < len(reply):
        chunk = sock.recv(len(reply) - len(data))
        assert chunk, data
        data += chunk
    assert data == reply


def _warm_up(sock: socket.socket, command: bytes, reply: bytes) -> None:
    """K commands pipelined and their replies read: the kernel grows the server's send
    buffer for this connection, so its replies to a whole read are then taken at once (the
    first sends of a connection would wait: the old server let B in meanwhile)."""
    sender = threading.Thread(target=sock.sendall, args=(command * K,))
    sender.start()
    left = K * len(reply)
    while left:
        chunk = sock.recv(min(left, 1 << 16))
        assert chunk, "the server closed A"
        left -= len(chunk)
    sender.join()


def _drain(sock: socket.socket) -> int:
    """Read what ``sock`` holds now, without waiting; return how many bytes."""
    got = 0
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except BlockingIOError:
            return got
        assert chunk, "the server closed A"
        got += len(chunk)


def _state(pid: int) -> str:
    """The process's state letter in ``/proc/<pid>/stat`` (``T``: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@contextlib.contextmanager
def _frozen(proc: subprocess.Popen[bytes] | None) -> Iterator[None]:
    """The server stopped (SIGSTOP delivered: the signal is asynchronous) for the block."""
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: _state(proc.pid) == "T", what="the server stopped on SIGSTOP",
                   interval=0.001)
        yield
    finally:
        proc.send_signal(signal.SIGCONT)


def a_replies_before_b(name: str) -> int:
    """How many of A's K replies had arrived when B's reply arrived."""
    start, command, reply = SERVERS[name]
    server = start()
    try:
        a = _connect(server.host, server.port)
        b = _connect(server.host, server.port)
        with a, b:
            _warm_up(a, command, reply)  # both connections served (their tasks wait)
            _round_trip(b, command, reply)
            a.setblocking(False)
            b.setblocking(False)
            flood = memoryview(command * K)
            with _frozen(server.proc):  # all of A's commands wait in the kernel first
                while flood:
                    try:
                        flood = flood[a.send(flood):]
                    except BlockingIOError:
                        break
            received = 0
            with selectors.DefaultSelector() as selector:
                selector.register(a, selectors.EVENT_READ | selectors.EVENT_WRITE)
                selector.register(b, selectors.EVENT_READ)
                while True:
                    ready = selector.select(timeout=30)
                    assert ready, "the server answered neither A nor B for 30 s"
                    for key, events in ready:
                        if key.fileobj is b:
                            # Every reply the server sent A before B's is in A's buffer now.
                            received += _drain(a)
                            return received // len(reply)
                        if events & selectors.EVENT_READ:
                            if not received:  # the server is busy with A: B asks now
                                b.sendall(command)
                            received += _drain(a)
                        if events & selectors.EVENT_WRITE and flood:
                            with contextlib.suppress(BlockingIOError):
                                flood = flood[a.send(flood):]
                            if not flood:
                                selector.modify(a, selectors.EVENT_READ)
    finally:
        server.stop()


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_a_connection_is_answered_while_another_floods_the_server(name: str) -> None:
    replies = a_replies_before_b(name)
    assert replies < K // 2, f"B answered after {replies} of A's {K} replies"


# -- the turn itself ---------------------------------------------------------------------------


def test_a_turn_ends_after_its_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving, "TURN_SECONDS", 3600.0)  # only the count can end it here
    turn = serving.Turn()
    turn.begin()
    assert [turn.ran() for _ in range(serving.TURN)] == [False] * (serving.TURN - 1) + [True]
    turn.begin(serving.TURN_READ_UNIT * (serving.TURN - 1))
    assert turn.ran() is True  # a large read takes its share of the turn
    turn.begin()  # the next turn has its whole count again
    assert [turn.ran() for _ in range(serving.TURN - 1)] == [False] * (serving.TURN - 1)


def test_a_turn_ends_after_its_time() -> None:
    turn = serving.Turn()
    turn.begin()
    ends = time.monotonic() + serving.TURN_SECONDS
    while time.monotonic() < ends:  # one slow command: the turn's time passes
        pass
    assert turn.ran() is True
