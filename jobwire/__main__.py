"""``python -m jobwire``: the ``jobwire`` command (extra ``jobwire[cli]``)."""

from jobwire.cli import main

main()
