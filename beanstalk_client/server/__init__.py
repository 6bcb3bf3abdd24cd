"""The bundled beanstalk server: a beanstalkd 1.12-compatible server written on anyio.

For tests and development, not production (no binlog). Start it from async code with
:func:`serve`, from sync code with :func:`run_server`, or from a shell with
``python -m beanstalk_client.server`` (which takes beanstalkd's own flags)::

    async with serve() as server:          # 127.0.0.1, a free port
        print(server.url)                  # beanstalk://127.0.0.1:PORT

    with run_server(max_job_size=1024) as server:
        ...
"""

from __future__ import annotations

from ._serve import MAX_JOB_SIZE_LIMIT, Server, run_server, serve

__all__ = ["MAX_JOB_SIZE_LIMIT", "Server", "run_server", "serve"]
