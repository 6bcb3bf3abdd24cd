"""The bundled Gearman server: a gearmand 1.1.20-compatible job server.

For tests and development, not production (no persistent queue). Start it from async code with
:func:`serve`, from sync code with :func:`run_server`, or from a shell with
``python -m gearman_client.server -L ADDR -p PORT`` (gearmand's own flags)::

    async with serve() as server:          # 127.0.0.1, a free port
        print(server.url)                  # gearman://127.0.0.1:PORT

    with run_server() as server:
        ...

The names load on first use (:mod:`jobwire._lazy`), so that ``python -m gearman_client.server``
can listen before it imports the server.
"""

from __future__ import annotations

from jobwire._lazy import lazy_exports

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from ._serve import Server, run_server, serve

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = ["Server", "run_server", "serve"]
