"""``jobwire beanstalk ...``: commands for a beanstalkd server."""

from __future__ import annotations

import click

from jobwire.cli._app import url_option

ENV = "BEANSTALK_URL"
DEFAULT = "beanstalk://127.0.0.1:11300"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "beanstalkd server")


@click.group(name="beanstalk")
def group() -> None:
    """Commands for a beanstalkd server (--url or $BEANSTALK_URL)."""
