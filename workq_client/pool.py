"""``ClientPool``: blocking Workq clients shared by many threads (a web app's producers).

    from workq_client import ClientPool
    pool = ClientPool("workq://127.0.0.1:9922", size=4)        # opens nothing yet
    job_id = pool.add("emails", b"hello")                       # from any thread
    record = pool.run("resize", b"img-1", wait=5)               # holds a client until done

The rules every package's pool follows (bounded, checked on checkout, back-off, fork-safe)
are in :mod:`jobwire._pool`; docs/pool.md has the Django, Flask and gunicorn recipe.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from jobwire._pool import (
    DEFAULT_CHECKOUT_TIMEOUT,
    DEFAULT_SIZE,
    check_options,
)
from jobwire._pool import ClientPool as _Pool
from jobwire._url import AddressLike, address_url, resolve_address
from jobwire.serializers import Serializer

from ._api_sync import DEFAULT_MAX_BYTES, DEFAULT_TTL, DEFAULT_TTR, DEFAULT_WINDOW, Seconds
from ._client_sync import DEFAULT_PORT, Client
from ._records import B, JobResultRecord

__all__ = ["ClientPool"]


class ClientPool(_Pool[Client[B]]):
    """At most ``size`` blocking :class:`~workq_client.Client` connections to one Workq
    server, shared by any number of threads; opened when first needed.

    ``pool.add(...)``, ``pool.add_many(...)``, ``pool.schedule(...)``, ``pool.run(...)`` and
    ``pool.result(...)`` check a client out, send, and give it back (``run`` and ``result``
    keep their client while the server holds the reply back: ``size`` bounds those waits);
    ``with pool.client() as client:`` lends one for a block.

    Args:
        address: the server, in any form :class:`~workq_client.Client` takes.
        port: the port, when ``address`` is a bare host.
        size: the most connections open at once.
        checkout_timeout: seconds a call may wait for a free client, or for the server to
            accept a connection (``None``: no limit). Running out raises
            :class:`~jobwire.errors.PoolTimeout` (all in use) or ``ConnectFailed`` (server
            down); nothing is sent either way.
        serializer: as for the client (default: bytes as they are).
        client_options: the other keywords of :class:`~workq_client.Client` (``timeout``,
            ``connect_timeout``, ``ssl``...), for every client.

    Raises:
        TypeError, InvalidAddress: ``address`` is not a server address, or an option is not
            one the client takes (nothing is opened).
        ValueError: ``size`` < 1 or a negative ``checkout_timeout``.
    """

    def __init__(
        self,
        address: AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        size: int = DEFAULT_SIZE,
        checkout_timeout: float | None = DEFAULT_CHECKOUT_TIMEOUT,
        serializer: Serializer[B] | None = None,
        **client_options: Any,
    ) -> None:
        where = resolve_address(address, port, scheme="workq", default_port=DEFAULT_PORT,
                                unix=False)
        check_options(Client, address, port, serializer=serializer, **client_options)
        super().__init__(address_url(where, "workq"), size=size,
                         checkout_timeout=checkout_timeout)
        self._args = (address, port)
        self._serializer = serializer
        self._options = client_options

    def _connect(self) -> Client[B]:
        return Client(*self._args, serializer=self._serializer, **self._options)

    def _alive(self, client: Client[B]) -> bool:
        return not client._closed and client._transport.idle_and_open()

    def _broken(self, client: Client[B]) -> bool:
        return client._closed or client._transport.closed

    def add(
        self,
        name: str,
        payload: B,
        *,
        ttr: Seconds = DEFAULT_TTR,
        ttl: Seconds = DEFAULT_TTL,
        priority: int = 0,
        max_attempts: int = 0,
        max_fails: int = 0,
        job_id: str | None = None,
    ) -> str:
        """Enqueue a job under ``name`` on a pooled client; return its id.

        Sends ``add`` (as :meth:`Client.add <workq_client.Client.add>`).

        Raises:
            PoolTimeout: no client came free within ``checkout_timeout`` (nothing sent).
            ConnectFailed: no connection could be opened within ``checkout_timeout``.
            LocalProtocolError, SerializationError: an invalid argument (nothing sent).
            DuplicateJob, ClientError, ServerError: the server refused it.
            ConnectionLost, OperationTimeout: the connection failed or the reply did not come
                (the job may be added: retry with the same ``job_id``); that client is
                closed, not reused.
        """
        with self.client() as client:
            return client.add(name, payload, ttr=ttr, ttl=ttl, priority=priority,
                              max_attempts=max_attempts, max_fails=max_fails, job_id=job_id)

    def add_many(
        self,
        name: str,
        payloads: Iterable[B],
        *,
        ttr: Seconds = DEFAULT_TTR,
        ttl: Seconds = DEFAULT_TTL,
        priority: int = 0,
        job_ids: Iterable[str] | None = None,
        window: int = DEFAULT_WINDOW,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> list[str]:
        """Pipeline one ``add`` per payload on one pooled client; return their ids (as
        :meth:`Client.add_many <workq_client.Client.add_many>`).

        Raises:
            PoolTimeout, ConnectFailed: as for :meth:`add` (nothing sent).
            BulkError: some adds failed (``.results``); a client whose connection failed is
                closed, not reused.
            LocalProtocolError, SerializationError: a bad argument (nothing sent).
        """
        with self.client() as client:
            return client.add_many(name, payloads, ttr=ttr, ttl=ttl, priority=priority,
                                   job_ids=job_ids, window=window, max_bytes=max_bytes)

    def schedule(
        self,
        name: str,
        payload: B,
        at: datetime | float,
        *,
        ttr: Seconds = DEFAULT_TTR,
        ttl: Seconds = DEFAULT_TTL,
        priority: int = 0,
        max_attempts: int = 0,
        max_fails: int = 0,
        job_id: str | None = None,
    ) -> str:
        """Enqueue a job that becomes ready at ``at`` on a pooled client; return its id.

        Sends ``schedule`` (as :meth:`Client.schedule <workq_client.Client.schedule>`).

        Raises:
            PoolTimeout, ConnectFailed: as for :meth:`add` (nothing sent).
            LocalProtocolError: an invalid argument, or a naive ``at`` (nothing sent).
            DuplicateJob, ClientError, ServerError: as for :meth:`add`.
        """
        with self.client() as client:
            return client.schedule(name, payload, at, ttr=ttr, ttl=ttl, priority=priority,
                                   max_attempts=max_attempts, max_fails=max_fails,
                                   job_id=job_id)

    def run(
        self,
        name: str,
        payload: B,
        *,
        ttr: Seconds = DEFAULT_TTR,
        wait: Seconds = 60.0,
        priority: int = 0,
        job_id: str | None = None,
    ) -> JobResultRecord[B]:
        """Enqueue a job and wait for its result on a pooled client, which stays checked out
        until the reply (up to ``wait`` for a worker to lease it, then its ``ttr``).

        Sends ``run`` (as :meth:`Client.run <workq_client.Client.run>`).

        Raises:
            PoolTimeout, ConnectFailed: as for :meth:`add` (nothing sent).
            TimedOut: no worker took it in time, or it ran out of its TTR.
            NotFound: the job was deleted while waiting.
            DuplicateJob, ClientError, ServerError: the server refused it.
            LocalProtocolError, SerializationError, DeserializationError: as for the client.
            OperationTimeout: the client's ``timeout`` ran out on top of ``wait + ttr``
                (that client is closed).
        """
        with self.client() as client:
            return client.run(name, payload, ttr=ttr, wait=wait, priority=priority,
                              job_id=job_id)

    def result(self, job_id: str, *, wait: Seconds = 0.0) -> JobResultRecord[B]:
        """A job's result, waiting up to ``wait`` seconds for it on a pooled client.

        Sends ``result`` (as :meth:`Client.result <workq_client.Client.result>`).

        Raises:
            PoolTimeout, ConnectFailed: as for :meth:`add` (nothing sent).
            NotFound: no such job. TimedOut: no result within ``wait``.
            LocalProtocolError: an invalid id or wait (nothing sent).
            DeserializationError: the serializer cannot read the result.
        """
        with self.client() as client:
            return client.result(job_id, wait=wait)
