"""The bundled Workq server: a Workq 0.2.0-compatible server.

For tests and development, not production (nothing is persisted). Start it from async code with
:func:`serve`, from sync code with :func:`run_server`, or from a shell with
``python -m workq_client.server -listen 127.0.0.1:9922`` (the Go server's flag)::

    async with serve() as server:          # 127.0.0.1, a free port
        print(server.url)                  # workq://127.0.0.1:PORT

    with run_server() as server:
        ...

The names load on first use (:mod:`jobwire._lazy`), so that ``python -m workq_client.server``
can listen before it imports the server.
"""

from __future__ import annotations

from jobwire._lazy import lazy_exports

#: Workq's default port.
DEFAULT_PORT = 9922

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from ._serve import Server, run_server, serve
    from ._state import ServerState

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = ["DEFAULT_PORT", "Server", "ServerState", "run_server", "serve"]
