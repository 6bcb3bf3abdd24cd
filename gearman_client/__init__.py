"""Gearman for Python: a Sans-IO core, sync and async clients, workers, admin, and a bundled
server (``gearman_client.server``).

    from gearman_client import Client, Worker, Priority
    with Client("gearman://127.0.0.1:4730") as client:
        result = client.submit("reverse", b"hello")
"""

from __future__ import annotations

from ._admin import FunctionStatus, JobInfo, PriorityStatus, WorkerInfo
from ._api_async import JobStatus
from ._packets import DEFAULT_MAX_BODY_SIZE, PacketType, Priority
from ._protocol import Connection
from .aio import AsyncAdmin, AsyncClient, AsyncJob, AsyncWorker
from .client import Admin, Client
from .errors import BulkSubmitError, GearmanError, JobException, JobFailed, QueueFull, ServerError
from .worker import Job, Worker

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "Admin",
    "AsyncAdmin",
    "AsyncClient",
    "AsyncJob",
    "AsyncWorker",
    "BulkSubmitError",
    "Client",
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
    "Worker",
    "WorkerInfo",
]
