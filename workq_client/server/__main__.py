"""``python -m workq_client.server -listen HOST:PORT``: the bundled server with Workq's flag.

``-listen`` is the Go server's own flag (default ``127.0.0.1:9922``; port 0 picks a free one),
so scripts written for ``workq-server -listen ...`` run this server unchanged. SIGTERM and SIGINT
close every connection and exit with status 0. ``-v`` logs connections to stderr.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

import anyio

from ._serve import DEFAULT_PORT, serve

logger = logging.getLogger("workq_client.server")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workq_client.server",
        description="A Workq 0.2.0-compatible server (jobwire's bundled reference server).",
    )
    parser.add_argument("-listen", default=f"127.0.0.1:{DEFAULT_PORT}", metavar="HOST:PORT",
                        help=f"listen on HOST:PORT (default 127.0.0.1:{DEFAULT_PORT})")
    parser.add_argument("-v", dest="verbose", action="store_true",
                        help="log connections to stderr")
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


async def _run(host: str, port: int) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with serve(host, port):
            async for signum in signals:
                logger.info("%s: shutting down", signal.Signals(signum).name)
                return


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM or SIGINT; return the exit status."""
    args = _parser().parse_args(argv)
    prog = "workq_client.server"
    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        print(f"{prog}: error: -listen: {exc}", file=sys.stderr)
        return 2
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format=f"{prog}[%(process)d]: %(message)s")
    try:
        anyio.run(_run, host, port, backend="asyncio")
    except OSError as exc:
        print(f"{prog}: error: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
