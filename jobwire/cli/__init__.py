"""The ``jobwire`` command (extra ``jobwire[cli]``)."""

from __future__ import annotations


def main() -> None:
    """Entry point of the ``jobwire`` console script."""
    from jobwire.cli._app import main as run

    run()
