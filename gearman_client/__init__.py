"""Gearman for Python: a Sans-IO core, sync and async clients, workers, admin, and a bundled
server (``gearman_client.server``).

    from gearman_client import Client, Worker, Priority
    with Client("gearman://127.0.0.1:4730") as client:
        result = client.submit("reverse", b"hello")

Every public name loads its module on first use (:mod:`jobwire._lazy`), so that ``python -m
gearman_client.server`` imports neither the clients nor the workers.
"""

from __future__ import annotations

from jobwire._lazy import lazy_exports
from jobwire._version import __version__ as __version__

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from ._admin import FunctionStatus, JobInfo, PriorityStatus, WorkerInfo
    from ._api_async import DEFAULT_PORT, JobStatus

    # WorkData, WorkStatus, WorkWarning: what a foreground job's updates are
    # (AsyncClient.start, submit(on_update=...)); check_name, check_unique: what submit checks
    # a function name and a unique id against.
    from ._packets import (
        DEFAULT_MAX_BODY_SIZE,
        PacketType,
        Priority,
        WorkData,
        WorkStatus,
        WorkWarning,
        check_name,
        check_unique,
    )
    from ._protocol import Connection
    from .aio import AsyncAdmin, AsyncClient, AsyncJob, AsyncWorker
    from .client import Admin, Client
    from .errors import (
        BulkSubmitError,
        GearmanError,
        JobException,
        JobFailed,
        QueueFull,
        ServerError,
    )
    from .pool import ClientPool
    from .worker import Job, Worker, WorkerStats

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_PORT",
    "Admin",
    "AsyncAdmin",
    "AsyncClient",
    "AsyncJob",
    "AsyncWorker",
    "BulkSubmitError",
    "Client",
    "ClientPool",
    "Connection",
    "FunctionStatus",
    "GearmanError",
    "Job",
    "JobException",
    "JobFailed",
    "JobInfo",
    "JobStatus",
    "PacketType",
    "Priority",
    "PriorityStatus",
    "QueueFull",
    "ServerError",
    "WorkData",
    "WorkStatus",
    "WorkWarning",
    "Worker",
    "WorkerInfo",
    "WorkerStats",
    "check_name",
    "check_unique",
]
