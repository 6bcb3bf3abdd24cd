"""The async API: :class:`AsyncClient`, :class:`AsyncAdmin`, :class:`AsyncWorker` (anyio).

:class:`AsyncClient` adds :meth:`AsyncClient.start` to the generated command layer: a foreground
job whose WORK_DATA / WORK_WARNING / WORK_STATUS packets are read as an async iterator.
"""

from __future__ import annotations

from collections import deque
from types import EllipsisType
from typing import Any, Generic

from jobwire._pending import Pending
from jobwire._transport import AsyncTransport
from jobwire.serializers import Serializer, dump, load

from . import _api_async
from . import _packets as pk
from ._api_async import AsyncAdmin, B, JobStatus, as_bytes
from ._packets import Priority
from ._session import JobTracker, Update
from .worker import AsyncJob, AsyncWorker

__all__ = ["AsyncAdmin", "AsyncClient", "AsyncJob", "AsyncRunningJob", "AsyncWorker", "JobStatus"]


class AsyncRunningJob(Generic[B]):
    """A submitted foreground job: ``async for update in job`` yields its WORK_DATA,
    WORK_WARNING and WORK_STATUS packets (bytes as sent) until it ends; :meth:`result` returns
    the WORK_COMPLETE data through the client's serializer (or raises ``JobFailed`` /
    ``JobException``).

    ``timeout`` bounds each wait for the next update or the result.
    """

    def __init__(self, handle: bytes, transport: AsyncTransport, result: Pending[bytes],
                 timeout: float | None, serializer: Serializer[B]) -> None:
        self.handle = handle
        self._serializer = serializer
        self._transport = transport
        self._result = result
        self._timeout = timeout
        self._updates: deque[Update] = deque()
        self._signal: Pending[None] | None = None

    def _wake(self) -> None:
        signal, self._signal = self._signal, None
        if signal is not None and not signal.done:
            signal.resolve(None)

    def _on_update(self, update: Update) -> None:
        self._updates.append(update)
        self._wake()

    def __repr__(self) -> str:
        state = "done" if self._result.done else "running"
        return f"<gearman_client.AsyncRunningJob {self.handle.decode(errors='replace')} {state}>"

    def __aiter__(self) -> AsyncRunningJob[B]:
        return self

    async def __anext__(self) -> Update:
        while not self._updates:
            if self._result.done:
                raise StopAsyncIteration
            signal: Pending[None] = Pending("update")
            self._signal = signal
            await self._transport.wait_done(signal, self._timeout)
        return self._updates.popleft()

    async def result(self) -> B:
        """The job's result (updates not yet iterated are dropped).

        Raises:
            JobFailed, JobException, OperationTimeout, ConnectionLost.
            DeserializationError: the client's serializer cannot read the result.
        """
        raw = await self._transport.wait(self._result, self._timeout)
        return load(self._serializer, raw, self.handle, "result")


class AsyncClient(_api_async.AsyncClient[B]):
    __doc__ = _api_async.AsyncClient.__doc__

    async def start(
        self, function: str | bytes, data: B | None = None, *,
        unique: str | bytes | None = None, priority: Priority = Priority.NORMAL,
        timeout: float | EllipsisType | None = ...,
    ) -> AsyncRunningJob[B]:
        """Submit a foreground job (as :meth:`submit`) and return once JOB_CREATED arrives, with
        an :class:`AsyncRunningJob` to iterate its updates and await its result.

        Raises:
            QueueFull: the function's queue is at its ``maxqueue`` limit.
            ServerError: the server refused the job.
            LocalProtocolError: invalid arguments (nothing sent).
            SerializationError: the serializer cannot write ``data`` (nothing sent).
            OperationTimeout: no JOB_CREATED within ``timeout`` seconds.
            ConnectFailed: no server could be reached.
        """
        uniq = b"" if unique is None else as_bytes(unique, "unique")
        payload = b"" if data is None else dump(self._serializer, data, "data")
        packet = pk.submit_packet(as_bytes(function, "function"), payload, unique=uniq,
                                  priority=priority)
        limit = self._limit(timeout)
        transport, session = await self._pool.pick(uniq or None)
        created = session.request(packet)
        box: list[AsyncRunningJob[B]] = []

        def on_update(update: Update) -> None:
            box[0]._on_update(update)

        result = JobTracker(on_update)

        def on_created(p: Pending[Any]) -> None:
            if p.error is None and isinstance(p.reply, pk.JobCreated):
                box.append(AsyncRunningJob(p.reply.handle, transport, result, limit,
                                           self._serializer))
                session.track(p.reply.handle, result)

        created.then = on_created
        result.then = lambda _: box[0]._wake() if box else None
        await transport.call(created, limit)
        return box[0]
