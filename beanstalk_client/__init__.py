"""A beanstalkd client: Sans-IO core, blocking ``Client``, anyio ``AsyncClient``, and worker
pools (``AsyncWorker``, ``Worker``) with pipelined reserves on one connection.

    from beanstalk_client import Client
    with Client("127.0.0.1", 11300) as client:
        job_id = client.put(b"hello")
        job = client.reserve(wait=5)
        client.delete(job)

Every public name loads its module on first use (:mod:`jobwire._lazy`): importing the bundled
server (``python -m beanstalk_client.server``) imports neither the clients, the workers nor
more of anyio than the server needs.
"""

from __future__ import annotations

from jobwire._lazy import lazy_exports
from jobwire._version import __version__ as __version__

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:
    from jobwire.errors import (
        ConnectFailed,
        ConnectionLost,
        JobwireError,
        LocalProtocolError,
        OperationTimeout,
        PoolTimeout,
        ProtocolError,
        RemoteProtocolError,
    )

    from ._commands import (
        DEFAULT_PRIORITY,
        DEFAULT_TTR,
        Bury,
        Command,
        Delete,
        Ignore,
        Kick,
        KickJob,
        ListTubes,
        ListTubesWatched,
        ListTubeUsed,
        PauseTube,
        Peek,
        PeekBuried,
        PeekDelayed,
        PeekReady,
        Put,
        Quit,
        Release,
        Reserve,
        ReserveJob,
        ReserveWithTimeout,
        Stats,
        StatsJob,
        StatsTube,
        Touch,
        Use,
        Watch,
        validate_tube,
    )
    from ._events import (
        NEED_DATA,
        BuriedReply,
        ConnectionClosed,
        Deleted,
        ErrorCode,
        ErrorReply,
        Event,
        Found,
        Inserted,
        Kicked,
        NeedData,
        Ok,
        Paused,
        Released,
        Reply,
        Reserved,
        Touched,
        Using,
        Watching,
    )
    from ._job import Job, JobRef
    from ._protocol import Connection, ConnectionState
    from ._server_protocol import BadRequest, ServerConnection
    from ._stats import JobStats, ServerStats, TubeStats, parse_tube_stats
    from .aio import AsyncClient
    from .client import Client
    from .errors import (
        BadFormat,
        BeanstalkError,
        BulkError,
        Buried,
        DeadlineSoon,
        Draining,
        ExpectedCRLF,
        InternalError,
        JobTooBig,
        NotFound,
        NotIgnored,
        OutOfMemory,
        TimedOut,
        UnknownCommand,
    )
    from .pool import ClientPool
    from .worker import AsyncWorker, RetryPolicy, Worker, WorkerStats

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = [
    # clients
    "AsyncClient", "Client", "ClientPool", "Job", "JobRef", "JobStats", "ServerStats",
    "TubeStats",
    "DEFAULT_PRIORITY", "DEFAULT_TTR", "parse_tube_stats", "validate_tube",
    # workers
    "AsyncWorker", "RetryPolicy", "Worker", "WorkerStats",
    # errors
    "BadFormat", "BeanstalkError", "BulkError", "Buried", "ConnectFailed", "ConnectionLost",
    "DeadlineSoon", "Draining", "ExpectedCRLF", "InternalError", "JobTooBig", "JobwireError",
    "LocalProtocolError", "NotFound", "NotIgnored", "OperationTimeout", "OutOfMemory",
    "PoolTimeout", "ProtocolError", "RemoteProtocolError", "TimedOut", "UnknownCommand",
    # Sans-IO core
    "Connection", "ConnectionState", "ServerConnection", "BadRequest", "NEED_DATA", "NeedData",
    "Command", "Bury", "Delete", "Ignore", "Kick", "KickJob", "ListTubeUsed", "ListTubes",
    "ListTubesWatched", "PauseTube", "Peek", "PeekBuried", "PeekDelayed", "PeekReady", "Put",
    "Quit", "Release", "Reserve", "ReserveJob", "ReserveWithTimeout", "Stats", "StatsJob",
    "StatsTube", "Touch", "Use", "Watch",
    "Event", "Reply", "ConnectionClosed", "ErrorCode", "ErrorReply", "BuriedReply", "Deleted",
    "Found", "Inserted", "Kicked", "Ok", "Paused", "Released", "Reserved", "Touched", "Using",
    "Watching",
]
