"""What a bundled server does before its event loop runs, with the standard library only: its
shared command-line flags, its limits, its TLS context, and its listening sockets.

Why a module of its own, with no anyio and nothing of any protocol: ``python -m
beanstalk_client.server`` (and the Gearman and Workq servers' ``__main__``) bind and listen
*before* they import anything else, as beanstalkd and gearmand do in their first milliseconds.
A test suite that spawns a server and connects 0.1 s later (greenstalk's does) then finds it
listening; the kernel queues the connection until the event loop accepts it a moment later.
Each server's ``serve()`` binds with the same functions, so both ways listen alike, and
``jobwire._serving`` accepts on these sockets.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import socket
import stat
import sys
from types import SimpleNamespace

from ._record import record

TYPE_CHECKING = False  # neither typing nor argparse is imported: a server starts without them
if TYPE_CHECKING:
    import argparse
    import ssl
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = [
    "SUPPRESS", "Limits", "ServerParser", "add_server_arguments", "byte_size", "close_unix",
    "parse_command_line", "server_options", "server_tls_context", "tcp_sockets", "unix_socket",
]


@record
class Limits:
    """What a bundled server allows a client. ``None`` is no limit: the default for each, as
    beanstalkd and gearmand have none of them.

    Args:
        max_connections: connections served at once; one more is accepted and closed at once
            (its client sees the connection closed, rather than waiting in the accept queue).
        idle_timeout: seconds a connection may send nothing (and not take its replies) before
            it is closed. A connection that waits for the server (a blocking reserve or lease,
            a sleeping Gearman worker) or holds work (reserved beanstalk jobs, a Gearman job
            running or awaited) is not idle.
        line_timeout: seconds a command may take to arrive once its first byte has: a command
            line with its job body or payload, a Gearman packet. Slow senders (slowloris) are
            closed after it.

    Raises:
        ValueError: a limit is not positive.
    """

    max_connections: int | None = None
    idle_timeout: float | None = None
    line_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")
        for name in ("idle_timeout", "line_timeout"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, got {value}")

    @property
    def timed(self) -> bool:
        """True when reads have a deadline (an idle or a line timeout is set)."""
        return self.idle_timeout is not None or self.line_timeout is not None


def server_tls_context(
    cert_file: str, key_file: str | None = None, client_ca_file: str | None = None
) -> ssl.SSLContext:
    """A server-side TLS context from a PEM certificate chain and its private key (``key_file``
    may be omitted when ``cert_file`` holds both). With ``client_ca_file`` (PEM CA
    certificates), mutual TLS: a client must present a certificate issued by one of them or
    its handshake fails; without it, clients are not asked for certificates.

    Raises:
        OSError: a file cannot be read.
        ssl.SSLError: the files hold no usable certificate, key or CA, or they do not match.
    """
    import ssl  # only a server that serves TLS pays for the import

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file is not None:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


#: ``help=SUPPRESS``: a flag accepted but not shown by ``--help`` (argparse's own marker).
SUPPRESS = "==SUPPRESS=="


class _Flag:
    """One flag of a :class:`ServerParser`, as its ``add_argument`` was called."""

    __slots__ = ("action", "default", "dest", "flags", "help", "metavar", "type")

    def __init__(
        self, flags: tuple[str, ...], dest: str, action: str, type: Callable[[str], Any] | None,
        default: Any, metavar: str | None, help: str | None,
    ) -> None:
        self.flags, self.dest, self.action, self.type = flags, dest, action, type
        self.default, self.metavar, self.help = default, metavar, help


class ServerParser:
    """The command line of a bundled server, read without argparse: ``add_argument`` takes the
    subset of argparse's parameters the servers use (``dest``, ``type``, ``default``,
    ``metavar``, ``help`` and the actions ``store``, ``store_true`` and ``count``), and
    :meth:`parse_args` reads a command line of those flags exactly as argparse would.

    Why: importing argparse (with the ``gettext`` it imports) costs about 4 ms of a server's
    start, before it can listen (issue 18). Only the usual spellings are read here: ``-p 5``,
    ``--port 5``, ``--port=5``, ``-l=ADDR`` and each flag on its own. Anything else (``-h``,
    ``--help``, an unknown flag, a missing or bad value, ``-p5``, ``-VV``, an abbreviated
    ``--max-conn``, a value that begins with ``-``) is handed to an ``argparse.ArgumentParser``
    built from the same calls, so help, usage errors (``prog: error: ...``, exit status 2) and
    the rarer spellings are argparse's own.
    """

    def __init__(self, prog: str, description: str | None = None) -> None:
        self.prog = prog
        self.description = description
        self._flags: list[_Flag] = []
        self._by_name: dict[str, _Flag] = {}

    def add_argument(
        self, *flags: str, dest: str | None = None, action: str = "store",
        type: Callable[[str], Any] | None = None, default: Any = None,
        metavar: str | None = None, help: str | None = None,
    ) -> None:
        """Add a flag spelled as each of ``flags``, stored as ``dest`` (by default from the
        first ``--`` spelling, else the first: ``--max-memory`` is ``max_memory``).

        Raises:
            ValueError: a flag that does not begin with ``-``, one already added, or an
                action other than ``store``, ``store_true`` and ``count``.
        """
        if action not in ("store", "store_true", "count"):
            raise ValueError(f"unsupported action {action!r}")
        if not flags or any(not f.startswith("-") or f in self._by_name for f in flags):
            raise ValueError(f"bad or repeated flag in {flags!r}")
        if dest is None:
            first = next((f for f in flags if f.startswith("--")), flags[0])
            dest = first.lstrip("-").replace("-", "_")
        if action == "store_true" and default is None:
            default = False
        flag = _Flag(flags, dest, action, type, default, metavar, help)
        self._flags.append(flag)
        for name in flags:
            self._by_name[name] = flag

    def parse_args(self, argv: Sequence[str] | None = None) -> SimpleNamespace:
        """Read ``argv`` (the process's arguments when None): each flag's ``dest`` is an
        attribute of the result, its ``default`` when the flag is absent.

        Raises:
            SystemExit: ``-h``/``--help`` (status 0, after the help), or a command line
                argparse refuses (status 2, after the usage and ``prog: error: ...``).
        """
        args = sys.argv[1:] if argv is None else list(argv)
        values = self._read(args)
        if values is None:  # not one of the usual spellings: argparse decides
            return SimpleNamespace(**vars(self.argparse_parser().parse_args(args)))
        return SimpleNamespace(**values)

    def _read(self, args: list[str]) -> dict[str, Any] | None:
        """The values of ``args``, or None when argparse must read them."""
        values = {flag.dest: flag.default for flag in self._flags}
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            flag = self._by_name.get(arg)
            explicit: str | None = None
            if flag is None:
                name, equals, explicit = arg.partition("=")
                flag = self._by_name.get(name) if equals else None
                if flag is None or flag.action != "store":
                    return None
            if flag.action == "store_true":
                values[flag.dest] = True
            elif flag.action == "count":
                values[flag.dest] = (values[flag.dest] or 0) + 1
            else:
                if explicit is None:
                    if i == len(args) or args[i].startswith("-"):
                        return None  # missing, or perhaps a negative number: argparse's call
                    explicit = args[i]
                    i += 1
                try:
                    values[flag.dest] = explicit if flag.type is None else flag.type(explicit)
                except (TypeError, ValueError):
                    return None
        return values

    def argparse_parser(self) -> argparse.ArgumentParser:
        """An ``argparse.ArgumentParser`` with the same prog, description and flags: what
        reads the command lines :meth:`parse_args` does not, and writes ``--help``."""
        import argparse

        parser = argparse.ArgumentParser(prog=self.prog, description=self.description)
        for flag in self._flags:
            hidden = flag.help == SUPPRESS  # argparse compares its own marker by identity
            options: dict[str, Any] = {"dest": flag.dest, "action": flag.action,
                                       "default": flag.default,
                                       "help": argparse.SUPPRESS if hidden else flag.help}
            if flag.action == "store":
                options.update(type=flag.type, metavar=flag.metavar)
            parser.add_argument(*flag.flags, **options)
        return parser

    def format_help(self) -> str:
        """What ``--help`` prints (argparse's formatting)."""
        return self.argparse_parser().format_help()


def parse_command_line(
    build: Callable[[], ServerParser], argv: Sequence[str] | None
) -> SimpleNamespace:
    """Build a server's parser with ``build`` and read ``argv`` (the process's arguments when
    None).

    Raises:
        SystemExit: ``-h``, or arguments the parser refuses (argparse's own behaviour).
    """
    return build().parse_args(argv)


def add_server_arguments(parser: ServerParser, *, go_style: bool = False) -> None:
    """The flags every bundled server takes: ``-c/--max-connections``, ``--idle-timeout``,
    ``--line-timeout``, ``--tls-cert``, ``--tls-key``, ``--tls-client-ca``. With ``go_style``
    (the Workq server, whose Go original spells flags ``-flag``) each also answers to one
    dash."""

    def names(*flags: str) -> list[str]:
        long = [f for f in flags if f.startswith("--")]
        return [*flags, *(f[1:] for f in long)] if go_style else list(flags)

    parser.add_argument(*names("-c", "--max-connections"), dest="max_connections", type=int,
                        metavar="N", help="serve at most N connections at once; one more is "
                        "closed at once (default: no limit)")
    parser.add_argument(*names("--idle-timeout"), dest="idle_timeout", type=float,
                        metavar="SECONDS", help="close a connection that sends nothing and "
                        "takes no replies for SECONDS, unless it waits for the server or holds "
                        "work (default: never)")
    parser.add_argument(*names("--line-timeout"), dest="line_timeout", type=float,
                        metavar="SECONDS", help="close a connection whose command takes over "
                        "SECONDS to arrive once it began (default: never)")
    parser.add_argument(*names("--tls-cert"), dest="tls_cert", metavar="FILE",
                        help="serve TLS with this PEM certificate chain (and --tls-key)")
    parser.add_argument(*names("--tls-key"), dest="tls_key", metavar="FILE",
                        help="the PEM private key of --tls-cert (default: in --tls-cert)")
    parser.add_argument(*names("--tls-client-ca"), dest="tls_client_ca", metavar="FILE",
                        help="mutual TLS: serve only clients whose certificate was issued by "
                        "a CA in this PEM file (with --tls-cert)")


_SIZE_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def byte_size(text: str) -> int:
    """A ``--max-memory`` value: a positive number of bytes, optionally with a ``k``, ``M`` or
    ``G`` suffix (powers of 1024, any case; a trailing ``b`` is allowed: ``64MB``). An argparse
    ``type=`` for every bundled server's ``--max-memory``.

    Raises:
        ValueError: not a positive whole number of bytes (argparse reports it as a usage error).
    """
    import re  # only a server given --max-memory compiles the pattern

    match = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)[bB]?\s*", text)
    if match is None or int(match[1]) < 1:
        raise ValueError(f"a size in bytes (e.g. 65536, 512k, 64M, 1G) is expected, got {text!r}")
    return int(match[1]) * _SIZE_SUFFIXES[match[2].lower()]


byte_size.__name__ = "size"  # argparse says "invalid size value: 'x'"


def server_options(args: SimpleNamespace) -> tuple[Limits, ssl.SSLContext | None]:
    """The limits and TLS context :func:`add_server_arguments`' flags ask for.

    Raises:
        ValueError: a limit is out of range, or ``--tls-key`` or ``--tls-client-ca`` came
            without ``--tls-cert``.
        OSError, ssl.SSLError: the certificate or key cannot be loaded.
    """
    limits = Limits(args.max_connections, args.idle_timeout, args.line_timeout)
    if args.tls_cert is None:
        if args.tls_key is not None or args.tls_client_ca is not None:
            raise ValueError("--tls-key and --tls-client-ca need --tls-cert")
        return limits, None
    return limits, server_tls_context(args.tls_cert, args.tls_key, args.tls_client_ca)


#: The accept queue: connections the kernel completes before the server accepts them.
BACKLOG = 4096


def _bind_tcp(family: int, address: tuple[object, ...]) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def tcp_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on every address ``host`` resolves to (``localhost``: ::1 and
    127.0.0.1), all on one port; port 0 picks a free one.

    Raises:
        OSError: ``host`` does not resolve, or an address cannot be bound.
    """
    # An ASCII name as bytes: a str is encoded with the "idna" codec, whose import (stringprep,
    # unicodedata) costs a millisecond of the server's start.
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    infos = socket.getaddrinfo(
        name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_ADDRCONFIG
    )
    addresses = sorted({(family, address) for family, _, _, _, address in infos})
    tries = 10  # port 0 on several addresses: the first one's port may be taken on the next
    while True:
        sockets: list[socket.socket] = []
        chosen = port
        try:
            for family, address in addresses:
                sockets.append(_bind_tcp(family, (address[0], chosen, *address[2:])))
                chosen = sockets[0].getsockname()[1]
        except OSError as exc:
            for sock in sockets:
                sock.close()
            tries -= 1
            if exc.errno != errno.EADDRINUSE or port != 0 or not sockets or not tries:
                raise
            continue
        return sockets


def unix_socket(path: str) -> socket.socket:
    """A listening unix socket at ``path``, replacing a stale socket file left there.

    Raises:
        OSError: ``path`` exists and is not a socket, or cannot be bound.
    """
    _remove_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.bind(path)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def close_unix(sock: socket.socket, path: str) -> None:
    """Close a listening unix socket and remove its file."""
    sock.close()
    with contextlib.suppress(OSError):
        _remove_stale_socket(path)


def _remove_stale_socket(path: str) -> None:
    """Remove a unix socket file left by an earlier run; refuse to clobber anything else."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
    os.unlink(path)
