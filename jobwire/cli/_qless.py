"""``jobwire qless ...``: commands for a Redis server holding qless."""

from __future__ import annotations

import click

from jobwire.cli._app import url_option

ENV = "QLESS_URL"
DEFAULT = "redis://127.0.0.1:6379/0"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "Redis server holding qless")


@click.group(name="qless")
def group() -> None:
    """Commands for a Redis server holding qless (--url or $QLESS_URL)."""
