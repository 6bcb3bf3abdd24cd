"""The serving loop the three bundled servers share (``jobwire._serving``): what a server process
imports before its first reply, and the in-process servers' thread.

Issue 18: a spawned server must answer as soon as a bare Python process would. Importing asyncio
alone took about 50 ms of that, so a server answers its first command on a ``selectors`` loop,
and imports neither asyncio nor anyio, nor ``ssl`` without TLS flags, nor ``logging`` without
its verbose flag, nor ``locale``, nor ``typing`` (about 2 ms: the modules on the way read its
names only for mypy, ``jobwire._typing``), nor ``argparse`` (about 4 ms with ``gettext``: the
servers read their flags with ``jobwire._listen.ServerParser``). Checked by what is imported when
the first reply is sent, not by a clock.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from .conftest import PROTOCOLS, ServerProtocol
from .sockets import recv_at_least

#: Runs a server module as ``python -m`` does; at the first ``send`` (the first reply) prints
#: which of the modules a first reply must not need are imported, then ends the process.
_FIRST_REPLY_PROBE = """
import os, runpy, socket, sys
send = socket.socket.send
def first_send(self, data, *args):
    avoided = ("asyncio", "anyio", "trio", "ssl", "logging", "concurrent.futures", "locale",
               "threading", "typing", "argparse", "gettext", "dataclasses", "inspect")
    print(sorted(m for m in avoided if m in sys.modules), flush=True)
    send(self, data, *args)
    os._exit(0)
socket.socket.send = first_send
listen = socket.socket.listen
def listening(self, *args):
    listen(self, *args)
    print(self.getsockname()[1], flush=True)
socket.socket.listen = listening
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_module(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=str)
def test_the_first_reply_needs_only_what_answering_needs(protocol: ServerProtocol) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _FIRST_REPLY_PROBE, protocol.module, *protocol.listen_any],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(protocol.ping())
            assert recv_at_least(sock, len(protocol.pong)) == protocol.pong
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert out.strip() == "[]", out + err


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=str)
def test_call_runs_on_the_servers_thread(protocol: ServerProtocol) -> None:
    """``server.call(fn)``: how another thread reads or changes the state safely. ``fn`` runs on
    the loop's thread, its result or exception comes back to the caller, and after the server
    stopped it runs at once (nothing races with it then)."""
    with protocol.run_server() as server:
        here = threading.get_ident()
        assert server.call(threading.get_ident) != here
        with pytest.raises(ZeroDivisionError):
            server.call(lambda: 1 // 0)
        assert server.call(lambda: server.call(lambda: 42)) == 42  # from the loop itself
        where = server if hasattr(server, "host") else server.address  # beanstalk: address
        with socket.create_connection((where.host, where.port), timeout=5) as sock:
            sock.sendall(protocol.ping())  # the loop still serves
            assert recv_at_least(sock, len(protocol.pong)) == protocol.pong
    assert server.call(threading.get_ident) == here
