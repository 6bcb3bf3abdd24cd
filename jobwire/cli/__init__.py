"""The ``jobwire`` command (extra ``jobwire[cli]``: click and rich)."""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point of the ``jobwire`` console script and ``python -m jobwire``. Without the
    ``cli`` extra it says how to install it (exit status 2) instead of a traceback."""
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(
            f"jobwire: error: the jobwire command needs the cli extra ({exc.name} is missing): "
            "pip install 'jobwire[cli]'\n"
        )
        sys.exit(2)
    from jobwire.cli._app import main as run

    run()
