"""qless on Redis: the qless client and workers (``Worker``, ``AsyncWorker``), the Lua script
they share (``lua/qless.lua``: qless-core's commands, keys and replies, so qless-py, the Ruby
gem and the web UI share the same Redis), the Redis wire format (Sans-IO) and ``Redis`` /
``AsyncRedis`` connections.

    from qless_client import Client
    with Client("redis://127.0.0.1:6379/0") as client:
        jid = client.queue("emails").put("app.SendEmail", {"to": "a@example.com"})
        job = client.queues["emails"].pop()        # one job or None; pop(10): a list
        if job is not None:
            job.complete()

Every public name loads its module on first use (:mod:`jobwire._lazy`), so ``import
qless_client`` costs next to nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobwire._lazy import lazy_exports
from jobwire._version import __version__ as __version__

if TYPE_CHECKING:
    from ._client_async import (
        AsyncClient,
        AsyncJob,
        AsyncJobs,
        AsyncQueue,
        AsyncQueues,
        AsyncRecurringJob,
        AsyncWorkers,
        Observer,
        default_worker_name,
        new_jid,
    )
    from ._client_sync import Client, Job, Jobs, Queue, Queues, RecurringJob, Workers
    from ._redis import AsyncRedis, Redis, RedisOptions, parse_redis_address
    from ._resp import (
        NEED_DATA,
        Attribute,
        Connection,
        ConnectionClosed,
        ErrorReply,
        Push,
        Reply,
        Verbatim,
        encode_command,
    )
    from .errors import (
        AuthenticationError,
        BulkError,
        HasDependents,
        JobNotFound,
        LostLock,
        QlessError,
        RedisError,
        ScriptError,
        WrongQueue,
        WrongState,
    )
    from .pool import ClientPool
    from .worker import AsyncWorker, Next, RetryPolicy, Worker, WorkerStats

__all__ = [
    "NEED_DATA",
    "AsyncClient",
    "AsyncJob",
    "AsyncJobs",
    "AsyncQueue",
    "AsyncQueues",
    "AsyncRecurringJob",
    "AsyncRedis",
    "AsyncWorker",
    "AsyncWorkers",
    "Attribute",
    "AuthenticationError",
    "BulkError",
    "Client",
    "ClientPool",
    "Connection",
    "ConnectionClosed",
    "ErrorReply",
    "HasDependents",
    "Job",
    "JobNotFound",
    "Jobs",
    "LostLock",
    "Next",
    "Observer",
    "Push",
    "QlessError",
    "Queue",
    "Queues",
    "RecurringJob",
    "Redis",
    "RedisError",
    "RedisOptions",
    "Reply",
    "RetryPolicy",
    "ScriptError",
    "Verbatim",
    "Worker",
    "WorkerStats",
    "Workers",
    "WrongQueue",
    "WrongState",
    "default_worker_name",
    "encode_command",
    "new_jid",
    "parse_redis_address",
]

__getattr__, __dir__ = lazy_exports(__name__)
