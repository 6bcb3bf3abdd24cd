"""``python -m gearman_client.server``: the bundled server with gearmand's own flags.

``-L/--listen ADDR`` (default 127.0.0.1), ``-p/--port PORT`` (default 4730; 0 picks a free one and
prints nothing else than the logs). Flags that only make sense for the C server (``--threads``,
``--log-file``, ``--queue-type``, ``-d``...) are accepted and ignored, so gearmand command lines in
scripts and CI files run unchanged. SIGTERM/SIGINT or the admin ``shutdown`` command stop it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

import anyio

from .._packets import DEFAULT_MAX_BODY_SIZE
from ._serve import serve

DEFAULT_PORT = 4730


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gearman_client.server",
        description="A gearmand 1.1.20-compatible job server (jobwire's bundled server).",
    )
    parser.add_argument("-L", "--listen", default="127.0.0.1", metavar="ADDR",
                        help="address to listen on (default 127.0.0.1)")
    parser.add_argument("-p", "--port", type=int, default=DEFAULT_PORT, metavar="PORT",
                        help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--max-body-size", type=int, default=DEFAULT_MAX_BODY_SIZE,
                        metavar="BYTES", help="largest packet body accepted (default 64 MiB)")
    parser.add_argument("--job-handle-prefix", metavar="PREFIX",
                        help='handles are PREFIX:N (default "H:<host name>")')
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log connections and errors to stderr")
    for flag in ("--threads", "-t", "--log-file", "-l", "--queue-type", "-q", "--job-retries",
                 "-j", "--backlog", "-b", "--file-descriptors", "-f",
                 "--pid-file", "-P", "--user", "-u", "--worker-wakeup", "-w"):
        parser.add_argument(flag, dest=f"ignored_{flag.strip('-')}", metavar="X",
                            help=argparse.SUPPRESS)
    for flag in ("-d", "--daemon", "--exceptions", "--keepalive", "--round-robin", "-R"):
        parser.add_argument(flag, dest=f"ignored_{flag.strip('-')}", action="store_true",
                            help=argparse.SUPPRESS)
    return parser


async def _main(host: str, port: int, max_body_size: int, prefix: str | None) -> None:
    async with serve(host, port, max_body_size=max_body_size, handle_prefix=prefix) as server:
        logging.getLogger("gearman_client.server").info("listening on %s", server.url)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:

                async def on_signal() -> None:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

                async def on_shutdown() -> None:
                    await server.wait_closed()
                    tg.cancel_scope.cancel()

                tg.start_soon(on_signal)
                tg.start_soon(on_shutdown)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else
        logging.WARNING, stream=sys.stderr, format="%(asctime)s %(message)s",
    )
    try:
        anyio.run(_main, args.listen, args.port, args.max_body_size, args.job_handle_prefix)
    except OSError as exc:
        print(f"cannot listen on {args.listen}:{args.port}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
