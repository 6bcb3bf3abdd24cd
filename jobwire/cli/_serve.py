"""``jobwire serve beanstalk|gearman|workq [flags]``: the bundled servers, with their own flags
(``jobwire serve beanstalk -- --help`` lists them). qless has no bundled server: its server
is redis-server, with the Lua loaded by the client."""

from __future__ import annotations

import click

from jobwire.cli._app import shared_flags

_PASS = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@click.group(name="serve")
def group() -> None:
    """Run a bundled server in the foreground until SIGTERM or Ctrl-C."""


def _serve(module: str, args: tuple[str, ...]) -> int:
    import importlib

    main = importlib.import_module(module).main
    return int(main(list(args)))


@group.command(name="beanstalk", context_settings=_PASS)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@shared_flags
def serve_beanstalk(args: tuple[str, ...]) -> int:
    """The bundled beanstalkd: beanstalkd's own flags (-l ADDR, -p PORT, -z BYTES, -c N,
    --tls-cert/--tls-key ...; -h lists them)."""
    return _serve("beanstalk_client.server.__main__", args)


@group.command(name="gearman", context_settings=_PASS)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@shared_flags
def serve_gearman(args: tuple[str, ...]) -> int:
    """The bundled gearmand: gearmand's flags (-L ADDR, -p PORT, --allow-shutdown ...;
    -h lists them)."""
    return _serve("gearman_client.server.__main__", args)


@group.command(name="workq", context_settings=_PASS)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@shared_flags
def serve_workq(args: tuple[str, ...]) -> int:
    """The bundled Workq server: workq-server's flags (-listen HOST:PORT ...; -h lists
    them)."""
    return _serve("workq_client.server.__main__", args)
