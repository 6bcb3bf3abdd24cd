"""The servers a test suite talks to, one class per system, and how to start each one as a
subprocess on a free loopback port: the bundled servers (``python -m beanstalk_client.server``
and the like) and the real ones (``beanstalkd``, ``gearmand``, ``workq-server``,
``redis-server``), started with the same flags so one set of assertions holds for both.

A server object from the ``container`` or ``external`` backends (``_backends.py``) has no
process (``proc`` is ``None``): the methods that signal a process raise ``RuntimeError`` there.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobwire._url import TCPAddress

if TYPE_CHECKING:
    import pytest

from ._process import find_binary, free_port, spawn, stop_process, unavailable, wait_listening

__all__ = [
    "BeanstalkServer",
    "GearmanServer",
    "RedisServer",
    "WorkqServer",
    "beanstalk_command",
    "gearmand_binary",
    "redis_binary",
    "spawn_redis",
    "start_beanstalk",
    "start_gearman",
    "start_redis",
    "start_workq",
    "unique_name",
    "workq_binary",
]

Stopper = Callable[[], None]


def _hostport(host: str, port: int) -> str:
    return str(TCPAddress(host, port))


def _finish(proc: subprocess.Popen[bytes] | None, on_stop: Stopper | None,
            folder: str | None) -> None:
    try:
        if proc is not None:
            stop_process(proc)
        if on_stop is not None:
            on_stop()
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _process(proc: subprocess.Popen[bytes] | None, what: str) -> subprocess.Popen[bytes]:
    if proc is None:
        raise RuntimeError(f"{what} needs a server process this plugin started (bundled or "
                           f"binary backend), not a container or an external server")
    return proc


def unique_name(request: pytest.FixtureRequest) -> str:
    """A name for a tube, function or queue that no other test uses: the test's name (its
    characters outside ``A-Za-z0-9_.`` replaced by ``_``, 40 at most, so a job left on a
    shared server says where it came from) and 12 random hex digits."""
    stem = re.sub(r"[^A-Za-z0-9_.]", "_", request.node.name)[:40]
    return f"{stem}-{uuid.uuid4().hex[:12]}"


# -- beanstalkd ---------------------------------------------------------------------------------


@dataclass
class BeanstalkServer:
    """A beanstalkd-protocol server.

    ``kind`` is ``"bundled"`` (``python -m beanstalk_client.server``), ``"beanstalkd"`` (the
    real one), ``"container"`` or ``"external"``; ``proc`` is the process when this plugin
    started one. ``host``/``port`` are the TCP address (``unix_path`` instead for a unix
    socket); ``url`` is what a client takes.
    """

    kind: str
    proc: subprocess.Popen[bytes] | None
    host: str = "127.0.0.1"
    port: int = 0
    unix_path: str | None = None
    max_job_size: int = 65535
    extra: dict[str, object] = field(default_factory=dict)
    on_stop: Stopper | None = field(default=None, repr=False)
    owned_dir: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """``beanstalk://host:port``, or ``unix:///path`` for a unix socket."""
        if self.unix_path:
            return f"unix://{self.unix_path}"
        return f"beanstalk://{_hostport(self.host, self.port)}"

    def drain(self) -> None:
        """Drain mode, as an operator does it: SIGUSR1 (then a short pause for the server to
        take it).

        Raises:
            RuntimeError: there is no process (a container or an external server).
        """
        _process(self.proc, "drain()").send_signal(signal.SIGUSR1)
        time.sleep(0.2)

    def stop(self) -> None:
        """Stop the process (SIGTERM; SIGKILL after 5 s) or the container; nothing for an
        external server."""
        _finish(self.proc, self.on_stop, self.owned_dir)


def beanstalk_command(kind: str) -> list[str] | None:
    """The command line that starts a beanstalk server of ``kind`` (``"bundled"`` or
    ``"beanstalkd"``), before its flags; ``None`` when ``beanstalkd`` is not installed."""
    if kind == "bundled":
        return [sys.executable, "-m", "beanstalk_client.server"]
    if kind != "beanstalkd":
        raise ValueError(f"{kind!r}: a beanstalk server kind is 'bundled' or 'beanstalkd'")
    binary = find_binary("beanstalkd")
    return [binary] if binary else None


def start_beanstalk(
    kind: str = "bundled",
    *,
    max_job_size: int = 65535,
    unix: bool = False,
    port: int | None = None,
    args: Sequence[str] = (),
) -> BeanstalkServer:
    """Start a beanstalk server of ``kind`` (``"bundled"`` or ``"beanstalkd"``) with
    beanstalkd's flags: on 127.0.0.1 and ``port`` (a free one by default), or on a unix socket
    in a new temporary folder with ``unix=True``; ``-z max_job_size``; ``args`` are more flags.

    Raises:
        pytest.skip.Exception: beanstalkd is not installed (``pytest.fail`` under
            ``JOBWIRE_REQUIRE_REAL_SERVERS=1``).
        RuntimeError: the server exited or did not listen (see :func:`wait_listening`).
    """
    command = beanstalk_command(kind)
    if command is None:
        unavailable("beanstalkd is not installed (apt-get install -y beanstalkd)")
    if unix:
        folder = tempfile.mkdtemp(prefix="jobwire-")
        path = os.path.join(folder, "beanstalk.sock")
        proc = spawn([*command, "-l", f"unix:{path}", "-z", str(max_job_size), *args])
        _wait_or_clean(proc, path, kind, folder)
        return BeanstalkServer(kind, proc, unix_path=path, max_job_size=max_job_size,
                               owned_dir=folder)
    port = port or free_port()
    proc = spawn([*command, "-l", "127.0.0.1", "-p", str(port), "-z", str(max_job_size), *args])
    wait_listening(proc, ("127.0.0.1", port), kind)
    return BeanstalkServer(kind, proc, port=port, max_job_size=max_job_size)


def _wait_or_clean(proc: subprocess.Popen[bytes], address: tuple[str, int] | str, what: str,
                   folder: str) -> None:
    try:
        wait_listening(proc, address, what)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


# -- Gearman ------------------------------------------------------------------------------------


@dataclass
class GearmanServer:
    """A Gearman server: ``kind`` is ``"bundled"`` (``python -m gearman_client.server``),
    ``"gearmand"``, ``"container"`` or ``"external"``; ``proc`` is the process when this plugin
    started one."""

    kind: str
    proc: subprocess.Popen[bytes] | None
    port: int
    host: str = "127.0.0.1"
    on_stop: Stopper | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """``gearman://host:port``."""
        return f"gearman://{_hostport(self.host, self.port)}"

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)``."""
        return (self.host, self.port)

    def stop(self) -> None:
        """Stop the process or the container; nothing for an external server."""
        _finish(self.proc, self.on_stop, None)


def gearmand_binary() -> str | None:
    """The ``gearmand`` binary (Debian puts it in /usr/sbin), or ``None``."""
    return find_binary("gearmand")


def start_gearman(
    kind: str = "bundled",
    port: int | None = None,
    *,
    allow_shutdown: bool = False,
    extra: Sequence[str] = (),
) -> GearmanServer:
    """Start a Gearman server of ``kind`` (``"bundled"`` or ``"gearmand"``) on 127.0.0.1 and
    ``port`` (a free one by default), with gearmand's flags and the handle prefix ``H:vm`` (so
    handles look alike). ``allow_shutdown`` turns the bundled server's admin ``shutdown`` on
    (gearmand always obeys it); ``extra`` are more flags.

    Raises:
        pytest.skip.Exception: gearmand is not installed (``pytest.fail`` under
            ``JOBWIRE_REQUIRE_REAL_SERVERS=1``).
        RuntimeError: the server exited or did not listen.
    """
    port = port or free_port()
    if kind == "bundled":
        argv = [sys.executable, "-m", "gearman_client.server", "-L", "127.0.0.1", "-p", str(port),
                "--job-handle-prefix=H:vm", *(["--allow-shutdown"] if allow_shutdown else []),
                *extra]
    elif kind == "gearmand":
        binary = gearmand_binary()
        if binary is None:
            unavailable("gearmand is not installed "
                        "(apt-get install -y gearman-job-server gearman-tools)")
        argv = [binary, "--listen=127.0.0.1", f"--port={port}", "--log-file=none",
                "--threads=0", "--job-handle-prefix=H:vm", *extra]
    else:
        raise ValueError(f"{kind!r}: a Gearman server kind is 'bundled' or 'gearmand'")
    proc = spawn(argv)
    wait_listening(proc, ("127.0.0.1", port), kind)
    return GearmanServer(kind, proc, port)


# -- Workq --------------------------------------------------------------------------------------


@dataclass
class WorkqServer:
    """A Workq server: ``kind`` is ``"bundled"`` (``python -m workq_client.server``),
    ``"workq-server"`` (the Go server, when one is on ``PATH``), ``"container"`` or
    ``"external"``."""

    proc: subprocess.Popen[bytes] | None
    host: str
    port: int
    kind: str = "bundled"
    on_stop: Stopper | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """``workq://host:port``."""
        return f"workq://{_hostport(self.host, self.port)}"

    def connect(self) -> socket.socket:
        """A raw TCP connection to the server (``TCP_NODELAY``, 10 s timeout)."""
        sock = socket.create_connection((self.host, self.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def stop(self) -> None:
        """Stop the process or the container; nothing for an external server."""
        _finish(self.proc, self.on_stop, None)


def workq_binary() -> str | None:
    """A ``workq-server`` on ``PATH`` (Workq's Go server has no package), or ``None``."""
    return find_binary("workq-server")


def start_workq(
    port: int | None = None, *, args: Sequence[str] = (), kind: str = "bundled"
) -> WorkqServer:
    """Start a Workq server on 127.0.0.1 and ``port`` (a free one by default) with the Go
    server's flag (``-listen HOST:PORT``): the bundled one, or with ``kind="workq-server"``
    the real one from ``PATH``; ``args`` are more flags.

    Raises:
        pytest.skip.Exception: ``kind="workq-server"`` and there is none (``pytest.fail``
            under ``JOBWIRE_REQUIRE_REAL_SERVERS=1``).
        RuntimeError: the server exited or did not listen.
    """
    port = port or free_port()
    if kind == "bundled":
        command = [sys.executable, "-m", "workq_client.server"]
    elif kind == "workq-server":
        binary = workq_binary()
        if binary is None:
            unavailable(
                "workq-server is not on PATH: the real Workq server (cmd/workq-server of "
                "github.com/iamduo/workq, in Go) has no package; build it, or use the bundled "
                "server (--jobwire-backend=bundled)"
            )
        command = [binary]
    else:
        raise ValueError(f"{kind!r}: a Workq server kind is 'bundled' or 'workq-server'")
    proc = spawn([*command, "-listen", f"127.0.0.1:{port}", *args])
    wait_listening(proc, ("127.0.0.1", port), f"{kind} Workq server")
    return WorkqServer(proc, "127.0.0.1", port, kind)


# -- Redis (qless) ------------------------------------------------------------------------------


@dataclass
class RedisServer:
    """A Redis server for qless. Started here, it listens on TCP ``host:port`` and a unix
    socket at ``unix_path``, with ``args`` its command line; ``kind`` is ``"redis-server"``,
    ``"container"`` or ``"external"``. ``url`` carries no database number (the client's
    default, 0) unless an external URL named one."""

    proc: subprocess.Popen[bytes] | None
    port: int
    unix_path: str
    args: list[str]
    host: str = "127.0.0.1"
    kind: str = "redis-server"
    given_url: str | None = None
    on_stop: Stopper | None = field(default=None, repr=False)
    owned_dir: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """``redis://host:port`` (an external server: the URL as given)."""
        return self.given_url or f"redis://{_hostport(self.host, self.port)}"

    @property
    def unix_url(self) -> str:
        """``unix:///path`` of the server's unix socket."""
        if not self.unix_path:
            raise RuntimeError("this Redis server has no unix socket of ours")
        return f"unix://{self.unix_path}"

    def stop(self) -> None:
        """Stop the process (SIGTERM) or the container; nothing for an external server."""
        _finish(self.proc, self.on_stop, self.owned_dir)

    def kill(self) -> None:
        """Die at once (SIGKILL), as a crashed server does.

        Raises:
            RuntimeError: there is no process (a container or an external server).
        """
        proc = _process(self.proc, "kill()")
        proc.kill()
        proc.wait()

    def restart(self) -> None:
        """Stop and start again on the same port and socket (a server restart: scripts and
        connections are gone).

        Raises:
            RuntimeError: there is no process (a container or an external server).
        """
        stop_process(_process(self.proc, "restart()"))
        self.proc = spawn_redis(self.args, self.port)


def redis_binary() -> str:
    """The ``redis-server`` binary.

    Raises:
        pytest.skip.Exception: it is not installed (``pytest.fail`` under
            ``JOBWIRE_REQUIRE_REAL_SERVERS=1``). qless runs inside Redis, so there is no
            bundled server to fall back on.
    """
    binary = find_binary("redis-server")
    if binary is None:
        unavailable("redis-server is not installed (apt-get install -y redis-server); qless "
                    "runs inside Redis, so there is no bundled server for it")
    return binary


def spawn_redis(args: Sequence[str], port: int) -> subprocess.Popen[bytes]:
    """Run ``args`` (a ``redis-server`` command line) and wait for it to listen on ``port``."""
    proc = spawn(args)
    wait_listening(proc, ("127.0.0.1", port), "redis-server")
    return proc


def start_redis(*extra: str) -> RedisServer:
    """Start a ``redis-server`` on 127.0.0.1, a free port and a unix socket in a new temporary
    folder, without persistence (``--save "" --appendonly no``); ``extra`` are more arguments
    (e.g. ``"--requirepass", "pw"``).

    Raises:
        pytest.skip.Exception: redis-server is not installed (see :func:`redis_binary`).
        RuntimeError: the server exited or did not listen.
    """
    binary = redis_binary()
    port = free_port()
    folder = tempfile.mkdtemp(prefix="jobwire-redis-")
    unix_path = os.path.join(folder, "redis.sock")
    args = [
        binary, "--bind", "127.0.0.1", "--port", str(port), "--unixsocket", unix_path,
        "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", folder,
        "--logfile", "", *extra,
    ]
    try:
        proc = spawn_redis(args, port)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return RedisServer(proc, port, unix_path, args, owned_dir=folder)
