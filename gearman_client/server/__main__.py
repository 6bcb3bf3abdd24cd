"""``python -m gearman_client.server``: the bundled server with gearmand's own flags.

``-L/--listen ADDR`` (default 127.0.0.1), ``-p/--port PORT`` (default 4730; 0 picks a free one).
Flags that only make sense for the C server (``--threads``, ``--log-file``, ``--queue-type``,
``-d``...) are accepted and ignored, so gearmand command lines in scripts and CI files run
unchanged. SIGTERM/SIGINT stop it, and the admin ``shutdown`` command too with
``--allow-shutdown`` (off by default: gearmand 1.1.20 has no such command, and anyone who can
connect could stop the server).

Flags of its own, off by default as gearmand has none of them (``jobwire._listen``):
``-c/--max-connections N``, ``--idle-timeout S``, ``--line-timeout S``, and TLS with
``--tls-cert FILE --tls-key FILE`` (also spelled as gearmand's ``--ssl-certificate`` and
``--ssl-key``; gearmand's ``--ssl`` is accepted, TLS is on whenever a certificate is given, and
its ``--ssl-ca-file`` is ignored with a warning: clients are asked for no certificate).
Bounds gearmand lacks: ``--max-functions N`` (100,000) and ``--max-functions-per-connection N``
(10,000), on by default, and ``--max-memory BYTES`` (stored jobs; off by default).

It parses its flags, binds and listens with the standard library alone, and only then imports
what answering needs: the serving loop (``jobwire._serving``, no asyncio or anyio), the state
and the core (as ``python -m beanstalk_client.server`` does): a client that connects meanwhile
waits in the kernel's accept queue and is served a moment later.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from types import FrameType, ModuleType, SimpleNamespace

from jobwire._listen import (
    SUPPRESS,
    Limits,
    ServerParser,
    add_server_arguments,
    byte_size,
    parse_command_line,
    server_options,
    tcp_sockets,
)

TYPE_CHECKING = False  # typing is not imported: the server starts without it
if TYPE_CHECKING:
    import signal
    import ssl
else:  # signal's own functions, without the enums signal.py builds (0.5 ms a start)
    import _signal as signal

DEFAULT_PORT = 4730
PROG = "gearman_client.server"


def _parser() -> ServerParser:
    parser = ServerParser(
        prog="python -m gearman_client.server",
        description="A gearmand 1.1.20-compatible job server (jobwire's bundled server).",
    )
    parser.add_argument("-L", "--listen", default="127.0.0.1", metavar="ADDR",
                        help="address to listen on (default 127.0.0.1)")
    parser.add_argument("-p", "--port", type=int, default=DEFAULT_PORT, metavar="PORT",
                        help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--max-body-size", type=int, default=None, metavar="BYTES",
                        help="largest packet body accepted (default 64 MiB)")
    parser.add_argument("--job-handle-prefix", metavar="PREFIX",
                        help='handles are PREFIX:N (default "H:<host name>")')
    parser.add_argument("--allow-shutdown", action="store_true",
                        help="obey the admin 'shutdown [graceful]' command (default: unknown "
                        "command, as in gearmand 1.1.20)")
    parser.add_argument("--max-functions", type=int, default=100_000, metavar="N",
                        help="functions known at once; one more CAN_DO gets ERROR "
                        "MEMORY_ALLOCATION_FAILURE, a submit ERROR QUEUE_ERROR (default "
                        "100000)")
    parser.add_argument("--max-functions-per-connection", type=int, default=10_000,
                        metavar="N", help="functions one connection may register; one more "
                        "CAN_DO gets ERROR MEMORY_ALLOCATION_FAILURE (default 10000)")
    parser.add_argument("--max-memory", type=byte_size, default=None, metavar="BYTES",
                        help="bytes of stored jobs (suffixes k, M, G); a submit past it gets "
                        "ERROR QUEUE_ERROR (default: no limit)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log connections and errors to stderr")
    add_server_arguments(parser)
    parser.add_argument("--ssl-certificate", dest="tls_cert", metavar="FILE",
                        help=SUPPRESS)
    parser.add_argument("--ssl-key", dest="tls_key", metavar="FILE", help=SUPPRESS)
    parser.add_argument("--ssl", dest="ignored_ssl", action="store_true", help=SUPPRESS)
    parser.add_argument("--ssl-ca-file", dest="ssl_ca_file", metavar="FILE",
                        help=SUPPRESS)
    for flag in ("--threads", "-t", "--log-file", "-l", "--queue-type", "-q", "--job-retries",
                 "-j", "--backlog", "-b", "--file-descriptors", "-f",
                 "--pid-file", "-P", "--user", "-u", "--worker-wakeup", "-w"):
        parser.add_argument(flag, dest=f"ignored_{flag.strip('-')}", metavar="X",
                            help=SUPPRESS)
    for flag in ("-d", "--daemon", "--exceptions", "--keepalive", "--round-robin", "-R"):
        parser.add_argument(flag, dest=f"ignored_{flag.strip('-')}", action="store_true",
                            help=SUPPRESS)
    return parser


def _serve(
    sockets: list[socket.socket],
    args: SimpleNamespace,
    early: list[int],
    limits: Limits,
    ssl_context: ssl.SSLContext | None,
) -> None:
    """Serve in this thread until SIGTERM, SIGINT or an allowed ``shutdown`` (the loop, the
    state and the core: nothing else is imported before the first request is answered)."""
    from jobwire._serving import serve_process

    from .._packets import DEFAULT_MAX_BODY_SIZE
    from ._serve import Server, log

    try:
        bound = sockets[0].getsockname()
        max_body_size = (DEFAULT_MAX_BODY_SIZE if args.max_body_size is None
                         else args.max_body_size)
        server = Server(
            args.listen, int(bound[1]), max_body_size, args.job_handle_prefix, sockets=sockets,
            allow_shutdown=args.allow_shutdown, limits=limits, ssl_context=ssl_context,
            max_functions=args.max_functions,
            max_functions_per_connection=args.max_functions_per_connection,
            max_memory=args.max_memory,
        )
        log.info("listening on %s", server.url)
        loop = server._loop

        def stops(signum: int) -> bool:
            from signal import Signals

            log.info("%s: shutting down", Signals(signum).name)
            return True

        serve_process(loop, early, stops)
    finally:
        for sock in sockets:
            sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM, SIGINT or an allowed ``shutdown``; return the exit
    status."""
    args = parse_command_line(_parser, argv)
    if args.ssl_ca_file is not None:
        print(f"{PROG}: warning: --ssl-ca-file ignored: the bundled server asks clients for no "
              "certificate", file=sys.stderr)
    if not 0 <= args.port <= 65535:
        print(f"{PROG}: error: -p must be a port number (0-65535)", file=sys.stderr)
        return 2
    for flag, value in (("--max-functions", args.max_functions),
                        ("--max-functions-per-connection", args.max_functions_per_connection)):
        if value < 1:
            print(f"{PROG}: error: {flag} must be at least 1", file=sys.stderr)
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
        sockets = tcp_sockets(args.listen, args.port)
    except OSError as exc:
        print(f"cannot listen on {args.listen}:{args.port}: {exc}", file=sys.stderr)
        return 1

    # Listening: now what serving needs (the loop, the protocol, the state).
    from jobwire._heap import freeze_survivors

    def configure(logging: ModuleType) -> None:
        logging.basicConfig(
            level=logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else
            logging.WARNING, stream=sys.stderr, format="%(asctime)s %(message)s",
        )

    if args.verbose:
        import logging

        configure(logging)
    else:  # on the first warning: logging is not imported before then
        from ._serve import log

        log.setup = configure
    freeze_survivors()  # full collections would stop the flooded server (jobwire._heap)
    _serve(sockets, args, early, limits, ssl_context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
