"""``python -m beanstalk_client.server``: the bundled server with beanstalkd's own flags.

Why beanstalkd's flags: scripts, CI jobs and docker-compose files written for ``beanstalkd -l
ADDR -p PORT -z BYTES`` can run this server unchanged. Flags that only make sense for the C
server (``-b`` binlog directory, ``-f``/``-F`` fsync policy, ``-u`` user) are accepted and ignored
with a warning, so those command lines do not break either.

Flags of its own, off by default as beanstalkd has none of them (``jobwire._listen``):
``-c/--max-connections N``, ``--idle-timeout S``, ``--line-timeout S``, TLS with
``--tls-cert FILE --tls-key FILE``, and ``--max-memory BYTES`` (``64k``, ``512M``, ``1G``): a
``put`` that would take the stored jobs past it is answered ``OUT_OF_MEMORY``.

Why it listens first: beanstalkd listens a few milliseconds after it starts, and test suites
rely on it (greenstalk's spawns it and connects 0.1 s later, once, with no retry). So this
module parses the flags, binds and listens with the standard library alone
(``jobwire._listen``), and only then imports what answering needs: the serving loop
(``jobwire._serving``, on ``selectors``), the state and the protocol core. Neither asyncio nor
anyio is imported, nor ``ssl`` without TLS flags, nor ``logging`` without ``-V`` (unless a
warning must be shown); a client that connects meanwhile waits in the kernel's accept queue
and is served a moment later.

Signals as in beanstalkd: SIGUSR1 enters drain mode (``put`` answers DRAINING); SIGTERM and
SIGINT close every connection and exit with status 0 (also when they come while the server is
still starting). Nothing is written to stdout except the ``-v`` version line; ``-V`` logs
connections to stderr.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from types import FrameType

from jobwire._listen import (
    Limits,
    ServerParser,
    add_server_arguments,
    byte_size,
    close_unix,
    parse_command_line,
    server_options,
    tcp_sockets,
    unix_socket,
)

from . import MAX_JOB_SIZE_LIMIT

TYPE_CHECKING = False  # typing is not imported: the server starts without it
if TYPE_CHECKING:
    import signal
    import ssl
else:  # signal's own functions, without the enums signal.py builds (0.5 ms a start)
    import _signal as signal

VERSION_LINE = "beanstalkd 1.12 (jobwire bundled server)"
DEFAULT_PORT = 11300
PROG = "beanstalk_client.server"


def _parser() -> ServerParser:
    parser = ServerParser(
        prog="python -m beanstalk_client.server",
        description="A beanstalkd 1.12-compatible server (jobwire's bundled reference server).",
    )
    parser.add_argument("-l", dest="listen", default="127.0.0.1", metavar="ADDR",
                        help="listen on ADDR, or on a unix socket with unix:PATH "
                        "(default 127.0.0.1)")
    parser.add_argument("-p", dest="port", type=int, default=DEFAULT_PORT, metavar="PORT",
                        help=f"listen on PORT (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("-z", dest="max_job_size", type=int, default=65535, metavar="BYTES",
                        help=f"maximum job size in bytes (default 65535, at most "
                        f"{MAX_JOB_SIZE_LIMIT})")
    parser.add_argument("-V", dest="verbose", action="count", default=0,
                        help="verbose: log connections to stderr")
    parser.add_argument("-v", dest="version", action="store_true",
                        help="print the version and exit")
    parser.add_argument("-b", dest="binlog_dir", metavar="DIR", help="ignored (no binlog)")
    parser.add_argument("-f", dest="fsync_ms", metavar="MS", help="ignored (no binlog)")
    parser.add_argument("-F", dest="never_fsync", action="store_true",
                        help="ignored (no binlog)")
    parser.add_argument("-u", dest="user", metavar="USER",
                        help="ignored (does not drop privileges)")
    add_server_arguments(parser)
    parser.add_argument("--max-memory", dest="max_memory", type=byte_size, metavar="BYTES",
                        help="answer put with OUT_OF_MEMORY while the stored jobs take BYTES "
                        "(bodies plus a fixed overhead each; k, M, G suffixes: 64M) "
                        "(default: no limit)")
    return parser


def _signals() -> list[signal.Signals]:
    wanted = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGUSR1"):
        wanted.append(signal.SIGUSR1)
    return wanted


def _serve(
    sockets: list[socket.socket],
    unix_path: str | None,
    max_job_size: int,
    early: list[int],
    limits: Limits,
    ssl_context: ssl.SSLContext | None,
    max_memory: int | None,
) -> None:
    """Serve in this thread until SIGTERM or SIGINT (the loop, the state and the core: nothing
    else is imported before the first command is answered)."""
    from jobwire._serving import serve_process

    from ._serve import log, make_loop

    try:
        loop, state = make_loop(sockets, max_job_size=max_job_size, limits=limits,
                                ssl_context=ssl_context, max_memory=max_memory)

        def stops(signum: int) -> bool:
            if signum == getattr(signal, "SIGUSR1", None):
                state.draining = True
                log.info("SIGUSR1: entering drain mode")
                return False
            from signal import Signals

            log.info("%s: shutting down", Signals(signum).name)
            return True

        serve_process(loop, early, stops)
    finally:
        if unix_path is not None:
            close_unix(sockets[0], unix_path)
        for sock in sockets:
            sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM or SIGINT; return the exit status."""
    args = parse_command_line(_parser, argv)
    if args.version:
        print(VERSION_LINE)
        return 0
    for flag, value in (("-b", args.binlog_dir), ("-f", args.fsync_ms), ("-u", args.user)):
        if value is not None:
            print(f"{PROG}: warning: {flag} {value} ignored by the bundled server",
                  file=sys.stderr)
    if args.never_fsync:
        print(f"{PROG}: warning: -F ignored by the bundled server", file=sys.stderr)
    max_job_size = args.max_job_size
    if max_job_size > MAX_JOB_SIZE_LIMIT:
        print(f"{PROG}: warning: maximum job size was set to {MAX_JOB_SIZE_LIMIT}",
              file=sys.stderr)
        max_job_size = MAX_JOB_SIZE_LIMIT
    if max_job_size < 0:
        print(f"{PROG}: error: -z must not be negative", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"{PROG}: error: -p must be a port number (0-65535)", file=sys.stderr)
        return 2
    unix_path = args.listen[len("unix:"):] if args.listen.startswith("unix:") else None
    try:
        limits, ssl_context = server_options(args)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # ssl.SSLError is one
        print(f"{PROG}: error: cannot load the TLS certificate: {exc}", file=sys.stderr)
        return 1

    # Signals are kept, not left to their default action (SIGUSR1's would kill the process),
    # and acted on by the loop (also those that came before it ran).
    early: list[int] = []

    def keep(signum: int, frame: FrameType | None) -> None:
        early.append(signum)

    for signum in _signals():
        signal.signal(signum, keep)
    try:
        sockets = [unix_socket(unix_path)] if unix_path else tcp_sockets(args.listen, args.port)
    except OSError as exc:
        print(f"{PROG}: error: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1

    # Listening: now what serving needs (the loop, the protocol, the state).
    from jobwire._heap import freeze_survivors

    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format=f"{PROG}[%(process)d]: %(message)s")
    freeze_survivors()  # full collections would stop the flooded server (jobwire._heap)
    _serve(sockets, unix_path, max_job_size, early, limits, ssl_context, args.max_memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
