"""``jobwire dashboard --url URL ...``: the web dashboard (extra ``jobwire[web]``) over the
servers given, served by uvicorn on 127.0.0.1 unless ``--host`` says otherwise."""

from __future__ import annotations

import ipaddress
import os
import sys

import click

from jobwire.cli._app import USAGE, shared_flags

#: The environment variable ``--basic-auth`` falls back to.
AUTH_ENV = "JOBWIRE_DASHBOARD_AUTH"


def _allowed_hosts(host: str) -> list[str] | None:
    """The Host headers to accept: any when bound to every address (``0.0.0.0``, ``::``);
    else the bound name, and the loopback names when it is a loopback address (a page that
    rebinds its own DNS name to 127.0.0.1 is refused)."""
    if host in ("0.0.0.0", "::", ""):
        return None
    names = [host]
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        names += ["127.0.0.1", "localhost", "::1"]
    return names


def _auth(value: str | None) -> tuple[str, str] | None:
    if value is None or value == "":
        return None
    user, colon, password = value.partition(":")
    if not colon or not user or not password:
        raise click.BadParameter("give USER:PASSWORD", param_hint="--basic-auth")
    return user, password


@click.command(name="dashboard")
@click.option("--url", "urls", multiple=True, required=True, metavar="URL",
              help="A server to show (repeat): beanstalk://, gearman://, workq:// or "
                   "redis:// (qless).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True,
              help="The port to listen on.")
@click.option("--allow-actions", is_flag=True,
              help="Show and accept the actions (kick, delete, retry, unfail, cancel, pause).")
@click.option("--basic-auth", metavar="USER:PASSWORD", envvar=AUTH_ENV, show_envvar=True,
              default=None, help="Ask every request for these credentials.")
@click.option("--refresh", type=click.FloatRange(min=0.5), default=2.0, show_default=True,
              help="Seconds between two updates of the live numbers.")
@shared_flags
def command(urls: tuple[str, ...], host: str, port: int, allow_actions: bool,
            basic_auth: str | None, refresh: float) -> None:
    """Serve a web dashboard over the servers of --url until Ctrl-C: each server's queues with
    their counts and rates, live; queue and job pages; failed jobs; actions with
    --allow-actions."""
    try:
        import uvicorn

        from jobwire.web import create_app
    except ImportError as exc:
        click.echo(f"jobwire: error: the dashboard needs the web extra ({exc.name} is "
                   "missing): pip install 'jobwire[web]'", err=True)
        sys.exit(USAGE)
    app = create_app(urls, allow_actions=allow_actions, basic_auth=_auth(basic_auth),
                     allowed_hosts=_allowed_hosts(host), refresh=refresh)
    click.echo(f"jobwire dashboard on http://{'[' + host + ']' if ':' in host else host}:"
               f"{port}/ ({'actions on' if allow_actions else 'read-only'})", err=True)
    uvicorn.run(app, host=host, port=port, log_level=os.environ.get("JOBWIRE_LOG", "warning"))
