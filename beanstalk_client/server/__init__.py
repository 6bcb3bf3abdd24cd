"""The bundled beanstalk server: a beanstalkd 1.12-compatible server.

For tests and development, not production (no binlog). Start it from async code with
:func:`serve`, from sync code with :func:`run_server`, or from a shell with
``python -m beanstalk_client.server`` (which takes beanstalkd's own flags)::

    async with serve() as server:          # 127.0.0.1, a free port
        print(server.url)                  # beanstalk://127.0.0.1:PORT

    with run_server(max_job_size=1024) as server:
        ...

The names load on first use (:mod:`jobwire._lazy`), so that ``python -m
beanstalk_client.server`` can listen before it imports the server.
"""

from __future__ import annotations

from jobwire._lazy import lazy_exports

#: The largest ``max_job_size`` beanstalkd accepts (``-z``): 1 GiB.
MAX_JOB_SIZE_LIMIT = 1 << 30

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from ._serve import Server, run_server, serve

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = ["MAX_JOB_SIZE_LIMIT", "Server", "run_server", "serve"]
