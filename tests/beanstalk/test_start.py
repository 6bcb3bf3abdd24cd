"""The bundled server is ready as fast as test suites expect of beanstalkd: greenstalk's suite
spawns the binary, sleeps 0.1 s and connects once, with no retry. Import-path size is the
cause this guards (importing the client, the worker and all of anyio took 0.27-0.46 s)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from ..conftest import free_port, stop_process


def test_bundled_server_accepts_after_a_tenth_of_a_second_like_greenstalks_suite() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "beanstalk_client.server", "-l", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:  # no retry
            sock.sendall(b"list-tube-used\r\n")
            assert sock.recv(64) == b"USING default\r\n"
    finally:
        stop_process(proc)


def test_importing_the_server_does_not_import_the_client_or_worker() -> None:
    code = (
        "import sys, beanstalk_client.server; "
        "print(sorted(m for m in sys.modules if m.startswith('beanstalk_client.') and "
        "m.split('.')[1] in ('worker', 'aio', 'client', '_api_async', '_api_sync')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
