"""Server processes for tests: free loopback ports, starting, waiting for them to listen,
stopping, and what to do when a server cannot be had (skip, or fail under
``JOBWIRE_REQUIRE_REAL_SERVERS=1``)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from typing import IO, NoReturn

import pytest

__all__ = [
    "find_binary",
    "free_port",
    "require_real",
    "spawn",
    "stop_process",
    "unavailable",
    "wait_listening",
]

#: Seconds a server process may take to start listening before it counts as broken.
START_TIMEOUT = 15.0

#: The stderr file of each process :func:`spawn` started.
_LOGS: weakref.WeakKeyDictionary[subprocess.Popen[bytes], IO[bytes]] = weakref.WeakKeyDictionary()


def require_real() -> bool:
    """Whether ``JOBWIRE_REQUIRE_REAL_SERVERS=1`` is set (read at each call): a server that
    cannot be had then fails the test instead of skipping it."""
    return os.environ.get("JOBWIRE_REQUIRE_REAL_SERVERS") == "1"


def unavailable(message: str) -> NoReturn:
    """Skip the calling test (or fixture) with ``message`` as the reason, or fail it with that
    message when ``JOBWIRE_REQUIRE_REAL_SERVERS=1``.

    Raises:
        pytest.skip.Exception, pytest.fail.Exception: always.
    """
    if require_real():
        pytest.fail(f"{message} (and JOBWIRE_REQUIRE_REAL_SERVERS=1)", pytrace=False)
    pytest.skip(message)


def find_binary(name: str) -> str | None:
    """``name`` on ``PATH``, else in ``/usr/sbin`` or ``/usr/bin`` (Debian puts gearmand in
    sbin, which is not on a user's ``PATH``); ``None`` when it is nowhere."""
    found = shutil.which(name)
    if found:
        return found
    for folder in ("/usr/local/sbin", "/usr/sbin", "/usr/bin"):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    return None


def free_port() -> int:
    """A TCP port nothing listens on at the moment, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(argv: Sequence[str], *, cwd: str | None = None) -> subprocess.Popen[bytes]:
    """Start a server process; its stderr goes to an unnamed temporary file (never a pipe that
    nobody reads and that could block a chatty server), read back by :func:`wait_listening`
    when the process exits early."""
    # Closed by stop_process(): the file lives as long as the process.
    log: IO[bytes] = tempfile.TemporaryFile(prefix="jobwire-server-")  # noqa: SIM115
    proc = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.DEVNULL, stderr=log)
    _LOGS[proc] = log
    return proc


def _log_of(proc: subprocess.Popen[bytes]) -> bytes:
    log = _LOGS.get(proc)
    if log is not None:
        log.seek(0)
        return log.read()[-4000:]
    if proc.stderr is not None:
        return proc.stderr.read()[-4000:]
    return b""


def wait_listening(
    proc: subprocess.Popen[bytes],
    address: tuple[str, int] | str,
    what: str,
    timeout: float = START_TIMEOUT,
) -> None:
    """Wait until ``proc`` accepts connections at ``address`` (``(host, port)`` or a unix socket
    path).

    Raises:
        RuntimeError: the process exited first (the message has its exit status and the end of
            its stderr), or nothing listened within ``timeout`` seconds (the process is killed).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {_log_of(proc)!r}")
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(address)
            return
        except OSError:
            time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"{what} did not start listening at {address!r} within {timeout} s")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server process as an operator would (SIGTERM), killing it after 5 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log = _LOGS.pop(proc, None)
    if log is not None:
        log.close()
