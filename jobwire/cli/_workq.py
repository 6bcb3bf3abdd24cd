"""``jobwire workq ...``: commands for a Workq server."""

from __future__ import annotations

import click

from jobwire.cli._app import url_option

ENV = "WORKQ_URL"
DEFAULT = "workq://127.0.0.1:9922"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "Workq server")


@click.group(name="workq")
def group() -> None:
    """Commands for a Workq server (--url or $WORKQ_URL)."""
