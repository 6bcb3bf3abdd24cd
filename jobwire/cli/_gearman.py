"""``jobwire gearman ...``: commands for a Gearman servers (comma-separated)."""

from __future__ import annotations

import click

from jobwire.cli._app import url_option

ENV = "GEARMAN_SERVERS"
DEFAULT = "127.0.0.1:4730"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "Gearman servers (comma-separated)")


@click.group(name="gearman")
def group() -> None:
    """Commands for a Gearman servers (comma-separated) (--url or $GEARMAN_SERVERS)."""
