"""``python -m beanstalk_client.server``: the bundled server with beanstalkd's own flags.

Why beanstalkd's flags: scripts, CI jobs and docker-compose files written for ``beanstalkd -l
ADDR -p PORT -z BYTES`` can run this server unchanged. Flags that only make sense for the C
server (``-b`` binlog directory, ``-f``/``-F`` fsync policy, ``-u`` user) are accepted and ignored
with a warning, so those command lines do not break either.

Signals as in beanstalkd: SIGUSR1 enters drain mode (``put`` answers DRAINING); SIGTERM and
SIGINT close every connection and exit with status 0. Nothing is written to stdout except the
``-v`` version line; ``-V`` logs connections to stderr.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

import anyio

from ._serve import MAX_JOB_SIZE_LIMIT, serve

VERSION_LINE = "beanstalkd 1.12 (jobwire bundled server)"
DEFAULT_PORT = 11300

logger = logging.getLogger("beanstalk_client.server")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    return parser


async def _run(host: str, port: int, unix_path: str | None, max_job_size: int) -> None:
    wanted = [signal.SIGTERM, signal.SIGINT]
    drain_signal = getattr(signal, "SIGUSR1", None)
    if drain_signal is not None:
        wanted.append(drain_signal)
    # The receiver is installed before the socket is bound, so a signal sent as soon as the
    # server answers can never hit the default action (SIGUSR1's would kill the process).
    with anyio.open_signal_receiver(*wanted) as signals:
        async with serve(host, port, unix_path=unix_path, max_job_size=max_job_size) as server:
            async for signum in signals:
                if signum == drain_signal:
                    server.drain()
                    logger.info("SIGUSR1: entering drain mode")
                else:
                    logger.info("%s: shutting down", signal.Signals(signum).name)
                    return


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM or SIGINT; return the exit status."""
    args = _parser().parse_args(argv)
    if args.version:
        print(VERSION_LINE)
        return 0
    prog = "beanstalk_client.server"
    for flag, value in (("-b", args.binlog_dir), ("-f", args.fsync_ms), ("-u", args.user)):
        if value is not None:
            print(f"{prog}: warning: {flag} {value} ignored by the bundled server",
                  file=sys.stderr)
    if args.never_fsync:
        print(f"{prog}: warning: -F ignored by the bundled server", file=sys.stderr)
    max_job_size = args.max_job_size
    if max_job_size > MAX_JOB_SIZE_LIMIT:
        print(f"{prog}: warning: maximum job size was set to {MAX_JOB_SIZE_LIMIT}",
              file=sys.stderr)
        max_job_size = MAX_JOB_SIZE_LIMIT
    if max_job_size < 0:
        print(f"{prog}: error: -z must not be negative", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"{prog}: error: -p must be a port number (0-65535)", file=sys.stderr)
        return 2
    if args.verbose:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format=f"{prog}[%(process)d]: %(message)s")
    unix_path = args.listen[len("unix:"):] if args.listen.startswith("unix:") else None
    try:
        anyio.run(_run, args.listen, args.port, unix_path, max_job_size, backend="asyncio")
    except OSError as exc:
        print(f"{prog}: error: cannot listen on {args.listen}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
