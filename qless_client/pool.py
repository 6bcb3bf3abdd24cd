"""``ClientPool``: blocking qless clients shared by many threads (a web app's producers).

    from qless_client import ClientPool
    pool = ClientPool("redis://127.0.0.1:6379/0", size=4)      # opens nothing yet
    jid = pool.put("emails", "app.SendEmail", {"to": "a@example.com"})   # from any thread
    with pool.client() as client:                              # or a client for a block
        client.queue("emails").pause()

The rules every package's pool follows (bounded, checked on checkout, back-off, fork-safe)
are in :mod:`jobwire._pool`; docs/pool.md has the Django, Flask and gunicorn recipe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jobwire._pool import (
    DEFAULT_CHECKOUT_TIMEOUT,
    DEFAULT_SIZE,
    check_options,
)
from jobwire._pool import ClientPool as _Pool
from jobwire._url import AddressLike, address_url
from jobwire.serializers import Serializer

from ._client_sync import DEFAULT_WINDOW, Client, D, Seconds
from ._redis import Redis, parse_redis_address

__all__ = ["ClientPool"]

#: The keywords of :class:`Client` itself; the others are the connection's (:class:`Redis`).
_CLIENT_KEYWORDS = frozenset({"worker_name", "clock", "observer"})
#: The keywords :func:`parse_redis_address` reads besides the address.
_ADDRESS_KEYWORDS = ("db", "username", "password", "protocol", "client_name")


class ClientPool(_Pool[Client[D]]):
    """At most ``size`` blocking :class:`~qless_client.Client` objects, each on its own
    Redis connection, shared by any number of threads; opened when first needed.

    ``pool.put(...)`` and ``pool.put_many(...)`` check a client out, send, and give it back;
    ``with pool.client() as client:`` lends one for a block. Each new client loads the qless
    script on its first call (one ``SCRIPT LOAD`` per connection).

    Args:
        address: the Redis server, in any form :class:`~qless_client.Redis` takes
            (``redis://``, ``rediss://``, ``unix://`` URLs with db and password...); not a
            ``Redis`` object: a pool opens its own connections.
        port: the port, when ``address`` is a bare host.
        size: the most connections open at once.
        checkout_timeout: seconds a call may wait for a free client, or for the server to
            accept a connection (``None``: no limit). Running out raises
            :class:`~jobwire.errors.PoolTimeout` (all in use) or ``ConnectFailed`` (server
            down); nothing is sent either way.
        serializer: as for the client (default ``JSON``: any JSON value).
        client_options: the other keywords of :class:`~qless_client.Client` (``worker_name``,
            ``clock``, ``observer``) and of :class:`~qless_client.Redis` (``db``,
            ``password``, ``timeout``, ``ssl``...), for every client.

    Raises:
        TypeError, InvalidAddress: ``address`` is not a server address, or an option is not
            one the client or the connection takes (nothing is opened).
        ValueError: ``size`` < 1 or a negative ``checkout_timeout``.
    """

    def __init__(
        self,
        address: AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        size: int = DEFAULT_SIZE,
        checkout_timeout: float | None = DEFAULT_CHECKOUT_TIMEOUT,
        serializer: Serializer[D] | None = None,
        **client_options: Any,
    ) -> None:
        if isinstance(address, Redis):
            raise TypeError("a ClientPool opens its own connections: give it an address, "
                            "not a Redis")
        redis_options = {k: v for k, v in client_options.items() if k not in _CLIENT_KEYWORDS}
        check_options(Redis, address, port, **redis_options)
        found, options = parse_redis_address(
            address, port, **{k: redis_options[k] for k in _ADDRESS_KEYWORDS
                              if k in redis_options})
        where = address_url(found, "rediss" if options.tls else "redis")
        if options.db:
            where += f"?db={options.db}" if where.startswith("unix:") else f"/{options.db}"
        super().__init__(where, size=size, checkout_timeout=checkout_timeout)
        self._args = (address, port)
        self._serializer = serializer
        self._options = client_options

    def _connect(self) -> Client[D]:
        return Client(*self._args, serializer=self._serializer, **self._options)

    def _alive(self, client: Client[D]) -> bool:
        redis = client.redis
        return not redis._closed and redis._transport.idle_and_open()

    def _broken(self, client: Client[D]) -> bool:
        return client.redis._closed or client.redis._transport.closed

    def put(
        self,
        queue: str,
        klass: str,
        data: D | None = None,
        *,
        jid: str | None = None,
        priority: int | None = None,
        tags: Sequence[str] | None = None,
        delay: Seconds = 0,
        retries: int | None = None,
        depends: Sequence[str] | None = None,
    ) -> str:
        """Put a job of class ``klass`` into ``queue`` on a pooled client; return its jid.

        Sends qless ``put`` (one ``EVALSHA``; ``SCRIPT LOAD`` first on a new connection), as
        :meth:`Queue.put <qless_client.Queue.put>`.

        Raises:
            PoolTimeout: no client came free within ``checkout_timeout`` (nothing sent).
            ConnectFailed: no connection could be opened within ``checkout_timeout``.
            LocalProtocolError, SerializationError, TypeError: bad input (nothing sent).
            AuthenticationError, RedisError: the server refused the handshake or the call.
            ConnectionLost, OperationTimeout: the connection failed or the reply did not come
                (the job may be stored: retry with the same ``jid``); that client is closed,
                not reused.
        """
        with self.client() as client:
            return client.queue(queue).put(klass, data, jid=jid, priority=priority, tags=tags,
                                           delay=delay, retries=retries, depends=depends)

    def put_many(
        self,
        queue: str,
        jobs: Iterable[tuple[str, D]],
        *,
        priority: int | None = None,
        tags: Sequence[str] | None = None,
        delay: Seconds = 0,
        retries: int | None = None,
        window: int = DEFAULT_WINDOW,
    ) -> list[str]:
        """Pipelined ``put`` of many ``(klass, data)`` jobs into ``queue`` on one pooled
        client; return the jids (as :meth:`Queue.put_many <qless_client.Queue.put_many>`).

        Raises:
            PoolTimeout, ConnectFailed: as for :meth:`put` (nothing sent).
            BulkError: some puts failed (``.done``, ``.error``); a client whose connection
                failed is closed, not reused.
            LocalProtocolError, TypeError: a bad job (nothing sent).
        """
        with self.client() as client:
            return client.queue(queue).put_many(jobs, priority=priority, tags=tags,
                                                delay=delay, retries=retries, window=window)
