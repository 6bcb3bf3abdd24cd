"""``ClientPool``: blocking Gearman clients shared by many threads (a web app's producers).

    from gearman_client import ClientPool
    pool = ClientPool("gearman://127.0.0.1:4730", size=4)       # opens nothing yet
    handle = pool.submit_background("resize", b"img-1")          # from any thread
    result = pool.submit("reverse", b"abc", timeout=30)          # holds a client until done

The rules every package's pool follows (bounded, checked on checkout, back-off, fork-safe)
are in :mod:`jobwire._pool`; docs/pool.md has the Django, Flask and gunicorn recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from types import EllipsisType
from typing import Any

from jobwire._pool import (
    DEFAULT_CHECKOUT_TIMEOUT,
    DEFAULT_SIZE,
    check_options,
)
from jobwire._pool import ClientPool as _Pool
from jobwire._url import address_url
from jobwire.serializers import Serializer

from ._api_sync import DEFAULT_WINDOW, B, Client, ServersLike, _addresses
from ._packets import Priority
from ._session import Update

__all__ = ["ClientPool"]


class ClientPool(_Pool[Client[B]]):
    """At most ``size`` blocking :class:`~gearman_client.Client` objects for one Gearman
    server (or one list of servers), shared by any number of threads; opened when first
    needed.

    ``pool.submit_background(...)``, ``pool.submit_background_many(...)`` and
    ``pool.submit(...)`` check a client out, send, and give it back (a foreground ``submit``
    keeps its client until the job's result comes: ``size`` bounds the jobs waited for at
    once); ``with pool.client() as client:`` lends one for a block.

    Each client holds one connection per server it has used. A new client connects to one
    server before it is handed out; a client is replaced when it has no open connection left
    (with several servers, one that still has a connection fails over and backs off on its
    own, as a lone client does).

    Args:
        servers: the server(s), in any form :class:`~gearman_client.Client` takes.
        port: the port, when ``servers`` is one bare host.
        size: the most clients open at once.
        checkout_timeout: seconds a call may wait for a free client, or for a server to
            accept a connection (``None``: no limit). Running out raises
            :class:`~jobwire.errors.PoolTimeout` (all in use) or ``ConnectFailed`` (no
            server); nothing is sent either way.
        serializer: as for the client (default: bytes as they are).
        client_options: the other keywords of :class:`~gearman_client.Client`
            (``timeout``, ``connect_timeout``, ``exceptions``, ``ssl``...), for every client.

    Raises:
        TypeError, InvalidAddress: ``servers`` is not a server address or a list of them, or
            an option is not one the client takes (nothing is opened).
        ValueError: ``size`` < 1 or a negative ``checkout_timeout``.
    """

    def __init__(
        self,
        servers: ServersLike = "127.0.0.1:4730",
        port: int | None = None,
        *,
        size: int = DEFAULT_SIZE,
        checkout_timeout: float | None = DEFAULT_CHECKOUT_TIMEOUT,
        serializer: Serializer[B] | None = None,
        **client_options: Any,
    ) -> None:
        where = ",".join(address_url(a, "gearman") for a in _addresses(servers, port))
        check_options(Client, servers, port, serializer=serializer, **client_options)
        super().__init__(where, size=size, checkout_timeout=checkout_timeout)
        self._args = (servers, port)
        self._serializer = serializer
        self._options = client_options

    def _connect(self) -> Client[B]:
        client: Client[B] = Client(*self._args, serializer=self._serializer, **self._options)
        try:
            client._pool.pick(None)  # connect now: a server that is down is the pool's to wait for
        except BaseException:
            client.close()
            raise
        return client

    def _alive(self, client: Client[B]) -> bool:
        if client._pool._closed:
            return False
        alive = False
        for server in client._pool.servers:
            transport = server.transport
            # A connection found dead is closed here; the client opens that server's again
            # when it next needs it.
            if transport is not None and transport.idle_and_open():
                alive = True
        return alive

    def _broken(self, client: Client[B]) -> bool:
        return client._pool._closed or not any(
            s.transport is not None and not s.transport.closed for s in client._pool.servers
        )

    def submit_background(
        self,
        function: str | bytes,
        data: B | None = None,
        *,
        unique: str | bytes | None = None,
        priority: Priority = Priority.NORMAL,
        at: datetime | float | None = None,
        timeout: float | EllipsisType | None = ...,
    ) -> bytes:
        """Queue a background job on a pooled client and return its handle.

        Sends SUBMIT_JOB_BG (_HIGH_BG/_LOW_BG), or SUBMIT_JOB_EPOCH with ``at``, as
        :meth:`Client.submit_background <gearman_client.Client.submit_background>`.

        Raises:
            PoolTimeout: no client came free within ``checkout_timeout`` (nothing sent).
            ConnectFailed: no connection could be opened within ``checkout_timeout``.
            QueueFull, ServerError: the server refused the job.
            LocalProtocolError, SerializationError: invalid arguments (nothing sent).
            OperationTimeout, ConnectionLost: no JOB_CREATED in time, or the connection
                closed first (the job may be queued); that client is closed, not reused.
        """
        with self.client() as client:
            return client.submit_background(function, data, unique=unique, priority=priority,
                                            at=at, timeout=timeout)

    def submit_background_many(
        self,
        jobs: Iterable[tuple[str | bytes, B]],
        *,
        priority: Priority = Priority.NORMAL,
        window: int = DEFAULT_WINDOW,
        timeout: float | EllipsisType | None = ...,
    ) -> list[bytes]:
        """Queue many ``(function, data)`` background jobs on one pooled client, pipelined;
        return the handles in order (as :meth:`Client.submit_background_many
        <gearman_client.Client.submit_background_many>`).

        Raises:
            PoolTimeout, ConnectFailed: as for :meth:`submit_background` (nothing sent).
            BulkSubmitError: some jobs were not queued (``.results``); a client whose
                connection failed is closed, not reused.
            LocalProtocolError: an invalid job (nothing sent).
        """
        with self.client() as client:
            return client.submit_background_many(jobs, priority=priority, window=window,
                                                 timeout=timeout)

    def submit(
        self,
        function: str | bytes,
        data: B | None = None,
        *,
        unique: str | bytes | None = None,
        priority: Priority = Priority.NORMAL,
        timeout: float | EllipsisType | None = ...,
        on_update: Callable[[Update], None] | None = None,
    ) -> B:
        """Run a job on a pooled client and return its result; the client stays checked out
        until the result comes.

        Sends SUBMIT_JOB (_HIGH/_LOW), as :meth:`Client.submit <gearman_client.Client.submit>`;
        ``on_update`` gets the job's WORK_DATA, WORK_WARNING and WORK_STATUS.

        Raises:
            PoolTimeout: no client came free within ``checkout_timeout`` (nothing sent).
            ConnectFailed: no connection could be opened within ``checkout_timeout``.
            JobFailed, JobException: the worker failed the job.
            QueueFull, ServerError: the server refused it.
            OperationTimeout: no result within ``timeout`` (that client is closed).
            ConnectionLost: the connection died while it ran (that client is closed).
            LocalProtocolError, SerializationError, DeserializationError: as for the client.
        """
        with self.client() as client:
            return client.submit(function, data, unique=unique, priority=priority,
                                 timeout=timeout, on_update=on_update)
