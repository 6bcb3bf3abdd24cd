"""``python -m workq_client.server -listen HOST:PORT``: the bundled server with Workq's flag.

``-listen`` is the Go server's own flag (default ``127.0.0.1:9922``; port 0 picks a free one),
so scripts written for ``workq-server -listen ...`` run this server unchanged. SIGTERM and SIGINT
close every connection and exit with status 0. ``-v`` logs connections to stderr.

Flags of its own, off by default (``jobwire._listen``; each also spelled with one dash, as Go
flags are): ``-c/--max-connections N``, ``--idle-timeout S``, ``--line-timeout S``, TLS with
``--tls-cert FILE --tls-key FILE``, and ``--max-memory BYTES`` (``64k``, ``512M``, ``1G``): an
``add``, ``schedule`` or ``run`` that would take the stored jobs past it is answered
``-SERVER-ERROR Unable to ...``, Workq's reply for a job it cannot store.

It parses its flags, binds and listens with the standard library alone, and only then imports
what answering needs: the serving loop (``jobwire._serving``, no asyncio or anyio), the state
and the core (as ``python -m beanstalk_client.server`` does): a client that connects meanwhile
waits in the kernel's accept queue and is served a moment later.
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
    parse_command_line,
    server_options,
    tcp_sockets,
)

from . import DEFAULT_PORT

TYPE_CHECKING = False  # typing is not imported: the server starts without it
if TYPE_CHECKING:
    import signal
    import ssl
else:  # signal's own functions, without the enums signal.py builds (0.5 ms a start)
    import _signal as signal

PROG = "workq_client.server"


def _parser() -> ServerParser:
    parser = ServerParser(
        prog="python -m workq_client.server",
        description="A Workq 0.2.0-compatible server (jobwire's bundled reference server).",
    )
    parser.add_argument("-listen", default=f"127.0.0.1:{DEFAULT_PORT}", metavar="HOST:PORT",
                        help=f"listen on HOST:PORT (default 127.0.0.1:{DEFAULT_PORT})")
    parser.add_argument("-v", dest="verbose", action="store_true",
                        help="log connections to stderr")
    add_server_arguments(parser, go_style=True)
    parser.add_argument("--max-memory", "-max-memory", dest="max_memory", type=byte_size,
                        metavar="BYTES", help="refuse add, schedule and run (-SERVER-ERROR) "
                        "while the stored jobs take BYTES (payloads and results plus a fixed "
                        "overhead each; k, M, G suffixes: 64M) (default: no limit)")
    return parser


def parse_listen(value: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[::1]:PORT`` for IPv6; an empty host means all interfaces).

    Raises:
        ValueError: no port, or a port outside 0-65535.
    """
    host, sep, raw_port = value.rpartition(":")
    if not sep or not raw_port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    port = int(raw_port)
    if port > 65535:
        raise ValueError(f"port must be 0-65535, got {port}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", port


def _serve(
    sockets: list[socket.socket],
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
        loop, _ = make_loop(sockets, limits=limits, ssl_context=ssl_context,
                            max_memory=max_memory)

        def stops(signum: int) -> bool:
            from signal import Signals

            log.info("%s: shutting down", Signals(signum).name)
            return True

        serve_process(loop, early, stops)
    finally:
        for sock in sockets:
            sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM or SIGINT; return the exit status."""
    args = parse_command_line(_parser, argv)
    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        print(f"{PROG}: error: -listen: {exc}", file=sys.stderr)
        return 2
    try:
        limits, ssl_context = server_options(args)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # ssl.SSLError is one
        print(f"{PROG}: error: cannot load the TLS certificate: {exc}", file=sys.stderr)
        return 1

    early: list[int] = []  # SIGTERM/SIGINT, kept for the loop (also before it runs)

    def keep(signum: int, frame: FrameType | None) -> None:
        early.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, keep)
    try:
        sockets = tcp_sockets(host, port)
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
    _serve(sockets, early, limits, ssl_context, args.max_memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
