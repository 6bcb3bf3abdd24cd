"""pytest plugin: server and client fixtures for beanstalkd, Gearman, Workq and qless.

Installed with jobwire (the ``pytest11`` entry point ``jobwire``), so every pytest run in an
environment that has jobwire gets these fixtures; ``docs/testing.md`` has the whole story.

Servers, one per system for the session: ``beanstalk_server``, ``gearman_server``,
``workq_server``, ``redis_server`` (for qless), each with ``.url``, ``.host`` and ``.port``.

Clients, with state of their own per test: ``beanstalk_client`` / ``async_beanstalk_client``
(using and watching the unique ``beanstalk_tube``), ``gearman_client`` /
``async_gearman_client`` (with the unique ``gearman_function``), ``workq_client`` /
``async_workq_client`` (``workq_name``), ``qless_client`` / ``async_qless_client`` (a flushed
database and ``qless_queue``). The async ones are for ``@pytest.mark.anyio`` tests.

Where the servers come from: ``--jobwire-backend=bundled|binary|container|external`` (or
``JOBWIRE_BACKEND``, or the ini option ``jobwire_backend``), per system as in
``binary,workq=bundled``; ``--jobwire-SYSTEM-url`` (``JOBWIRE_SYSTEM_URL``) for an external
server. A server that cannot be had skips the tests that need it, saying why, or fails them
under ``JOBWIRE_REQUIRE_REAL_SERVERS=1``.

What this module exports is the Python side: the server classes, the functions that start
servers (``start_beanstalk``, ``start_gearman``, ``start_workq``, ``start_redis``) and their
helpers, for suites that need a server of their own; the hooks and fixtures live in
``jobwire.testing._plugin``, which this module names in ``pytest_plugins``.
"""

from __future__ import annotations

from ._backends import BACKENDS, SYSTEMS, Settings, probe
from ._process import (
    find_binary,
    free_port,
    require_real,
    spawn,
    stop_process,
    unavailable,
    wait_listening,
)
from ._servers import (
    BeanstalkServer,
    GearmanServer,
    RedisServer,
    WorkqServer,
    beanstalk_command,
    gearmand_binary,
    redis_binary,
    spawn_redis,
    start_beanstalk,
    start_gearman,
    start_redis,
    start_workq,
    unique_name,
    workq_binary,
)

__all__ = [
    "BACKENDS",
    "SYSTEMS",
    "BeanstalkServer",
    "GearmanServer",
    "RedisServer",
    "Settings",
    "WorkqServer",
    "beanstalk_command",
    "find_binary",
    "free_port",
    "gearmand_binary",
    "probe",
    "redis_binary",
    "require_real",
    "spawn",
    "spawn_redis",
    "start_beanstalk",
    "start_gearman",
    "start_redis",
    "start_workq",
    "stop_process",
    "unavailable",
    "unique_name",
    "wait_listening",
    "workq_binary",
]

#: The hooks and fixtures: pytest registers this module (the entry point), then these.
pytest_plugins = ["jobwire.testing._plugin"]
