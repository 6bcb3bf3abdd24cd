"""A Workq client: Sans-IO core, blocking ``Client``, anyio ``AsyncClient``, workers.

    from workq_client import Client
    with Client("127.0.0.1", 9922) as client:
        job_id = client.add("ping", b"hello", ttr=5, ttl=60)
        job = client.lease("ping", wait=5)
        client.complete(job.job_id, b"pong")
        print(client.result(job_id).data)

The Sans-IO core (``Connection``, the command and reply classes) is exported too, for use with
any I/O; the bundled server is ``workq_client.server``. Every public name loads its module on
first use (:mod:`jobwire._lazy`), so that the server imports neither the clients nor the workers.
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
        NotSent,
        OperationTimeout,
        PoolTimeout,
        ProtocolError,
        RemoteProtocolError,
    )

    from ._api_async import DEFAULT_TTL, DEFAULT_TTR
    from ._commands import (
        I32_MAX,
        I32_MIN,
        MAX_ATTEMPTS,
        MAX_PAYLOAD,
        MAX_TTL_MS,
        MAX_TTR_MS,
        Add,
        Command,
        Complete,
        Delete,
        Fail,
        InspectJob,
        InspectJobs,
        InspectQueue,
        InspectQueues,
        InspectScheduledJobs,
        InspectServer,
        InvalidArgument,
        Lease,
        Result,
        Run,
        Schedule,
        Shape,
        validate_id,
        validate_name,
    )
    from ._events import (
        NEED_DATA,
        ConnectionClosed,
        ErrorKind,
        ErrorReply,
        Event,
        InspectReply,
        JobResult,
        Leased,
        NeedData,
        Ok,
        Record,
        Reply,
    )
    from ._protocol import Connection, ConnectionState
    from ._records import JobInfo, JobResultRecord, JobState, LeasedJob, QueueInfo, ServerInfo
    from ._server_protocol import BadRequest, ServerConnection
    from .aio import AsyncClient
    from .client import Client
    from .errors import (
        BulkError,
        ClientError,
        DuplicateJob,
        NotFound,
        ServerError,
        TimedOut,
        WorkqError,
    )
    from .pool import ClientPool
    from .worker import AsyncWorker, JobContext, LateResult, Worker, WorkerStats

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = [
    "DEFAULT_TTL",
    "DEFAULT_TTR",
    "I32_MAX",
    "I32_MIN",
    "MAX_ATTEMPTS",
    "MAX_PAYLOAD",
    "MAX_TTL_MS",
    "MAX_TTR_MS",
    "NEED_DATA",
    "Add",
    "AsyncClient",
    "AsyncWorker",
    "BadRequest",
    "BulkError",
    "Client",
    "ClientPool",
    "ClientError",
    "Command",
    "Complete",
    "ConnectFailed",
    "Connection",
    "ConnectionClosed",
    "ConnectionLost",
    "ConnectionState",
    "Delete",
    "DuplicateJob",
    "ErrorKind",
    "ErrorReply",
    "Event",
    "Fail",
    "InspectJob",
    "InspectJobs",
    "InspectQueue",
    "InspectQueues",
    "InspectReply",
    "InspectScheduledJobs",
    "InspectServer",
    "InvalidArgument",
    "JobContext",
    "JobInfo",
    "JobResult",
    "JobResultRecord",
    "JobState",
    "JobwireError",
    "LateResult",
    "Lease",
    "Leased",
    "LeasedJob",
    "LocalProtocolError",
    "NeedData",
    "NotFound",
    "NotSent",
    "Ok",
    "OperationTimeout",
    "PoolTimeout",
    "ProtocolError",
    "QueueInfo",
    "Record",
    "RemoteProtocolError",
    "Reply",
    "Result",
    "Run",
    "Schedule",
    "ServerConnection",
    "ServerError",
    "ServerInfo",
    "Shape",
    "TimedOut",
    "Worker",
    "WorkerStats",
    "WorkqError",
    "validate_id",
    "validate_name",
]
