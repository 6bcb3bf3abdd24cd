"""``ClientPool``: blocking beanstalk clients shared by many threads (a web app's producers).

    from beanstalk_client import ClientPool
    pool = ClientPool("beanstalk://127.0.0.1:11300", size=4)   # opens nothing yet
    job_id = pool.put(b"hello", tube="emails")                 # from any thread
    with pool.client() as client:                              # or a client for a block
        client.use("reports")
        client.put_many([b"a", b"b"])

The rules every package's pool follows (bounded, checked on checkout, back-off, fork-safe)
are in :mod:`jobwire._pool`; docs/pool.md has the Django, Flask and gunicorn recipe.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from jobwire._pool import (
    DEFAULT_CHECKOUT_TIMEOUT,
    DEFAULT_SIZE,
    check_options,
)
from jobwire._pool import ClientPool as _Pool
from jobwire._url import AddressLike, address_url, resolve_address
from jobwire.serializers import Serializer

from ._api_sync import DEFAULT_WINDOW
from ._client_sync import DEFAULT_PORT, Client
from ._commands import DEFAULT_PRIORITY, DEFAULT_TTR
from ._job import B

__all__ = ["ClientPool"]


class ClientPool(_Pool[Client[B]]):
    """At most ``size`` blocking :class:`~beanstalk_client.Client` connections to one
    beanstalkd, shared by any number of threads; opened when first needed.

    ``pool.put(...)`` and ``pool.put_many(...)`` check a client out, send, and give it back;
    ``with pool.client() as client:`` lends one for a block. A client's ``use``d tube stays
    with its connection: the pool's own puts send ``use`` only when the client is on another
    tube, and a block should ``use`` the tube it needs.

    Args:
        address: the server, in any form :class:`~beanstalk_client.Client` takes.
        port: the port, when ``address`` is a bare host.
        size: the most connections open at once.
        checkout_timeout: seconds a call may wait for a free client, or for the server to
            accept a connection (``None``: no limit). Running out raises
            :class:`~jobwire.errors.PoolTimeout` (all in use) or ``ConnectFailed`` (server
            down); nothing is sent either way.
        serializer: as for the client (``TEXT``, ``JSON``...; default: bytes as they are).
        client_options: the other keywords of :class:`~beanstalk_client.Client`
            (``timeout``, ``connect_timeout``, ``ssl``, ``max_body_size``...), for every client.

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
        where = resolve_address(address, port, scheme="beanstalk", default_port=DEFAULT_PORT)
        check_options(Client, address, port, serializer=serializer, **client_options)
        super().__init__(address_url(where, "beanstalk"), size=size,
                         checkout_timeout=checkout_timeout)
        self._args = (address, port)
        self._serializer = serializer
        self._options = client_options

    def _connect(self) -> Client[B]:
        return Client(*self._args, serializer=self._serializer, **self._options)

    def _alive(self, client: Client[B]) -> bool:
        return client._transport.idle_and_open()

    def _broken(self, client: Client[B]) -> bool:
        return client._transport.closed

    def put(
        self,
        body: B,
        *,
        tube: str = "default",
        priority: int = DEFAULT_PRIORITY,
        delay: float | timedelta = 0,
        ttr: float | timedelta = DEFAULT_TTR,
    ) -> int:
        """Put a job into ``tube`` on a pooled client; return its id.

        Sends ``use <tube>`` when the client is on another tube, then ``put <priority>
        <delay> <ttr> <bytes>`` and the body (as :meth:`Client.put
        <beanstalk_client.Client.put>`).

        Raises:
            PoolTimeout: no client came free within ``checkout_timeout`` (nothing sent).
            ConnectFailed: no connection could be opened within ``checkout_timeout``.
            LocalProtocolError: an invalid tube name or number (nothing sent).
            SerializationError, JobTooBig, Draining, Buried, OutOfMemory: as for the client.
            ConnectionLost, OperationTimeout: the connection failed or the reply did not come
                (the job may or may not be stored); that client is closed, not reused.
        """
        with self.client() as client:
            if client._tube != tube:
                client.use(tube)
            return client.put(body, priority=priority, delay=delay, ttr=ttr)

    def put_many(
        self,
        bodies: Iterable[B],
        *,
        tube: str = "default",
        priority: int = DEFAULT_PRIORITY,
        delay: float | timedelta = 0,
        ttr: float | timedelta = DEFAULT_TTR,
        window: int = DEFAULT_WINDOW,
    ) -> list[int]:
        """Put every body into ``tube`` on one pooled client, pipelined (``use`` first when
        the client is on another tube); return the ids (as :meth:`Client.put_many
        <beanstalk_client.Client.put_many>`).

        Raises:
            PoolTimeout, ConnectFailed: as for :meth:`put` (nothing sent).
            BulkError: some puts failed (``.results``: an id or an error per body); a client
                whose connection failed is closed, not reused.
            SerializationError, LocalProtocolError: a bad body or argument (nothing sent).
        """
        with self.client() as client:
            if client._tube != tube:
                client.use(tube)
            return client.put_many(bodies, priority=priority, delay=delay, ttr=ttr,
                                   window=window)
