"""``Redis`` and ``AsyncRedis``: connections to a Redis server on jobwire's transports.

They only move bytes: the wire format is the Sans-IO core (``_resp.py``), the calls are in
``_api_async.py`` (``_api_sync.py`` is generated from it), how bytes move and how callers wait is
``jobwire._transport``. What is here: the address (the collection's rule, plus Redis's own
user, password and database), the session that matches replies to callers, and the handshake.

Handshake: every new connection first sends, pipelined, ``HELLO 3 [AUTH user password]
[SETNAME name]`` (``protocol=3``) or ``AUTH [user] password`` and ``CLIENT SETNAME name``
(``protocol=2``, what is needed of them), then ``SELECT db`` when ``db`` is not 0; no call goes
out before all are answered. An error to any of them closes the connection and is raised
(``AuthenticationError`` for the credentials).

Redis keeps nothing per connection that these clients rely on besides what the handshake sets,
so when a connection ends (server restart, timeout, garbage) the next call opens a new one and
runs the handshake again; calls in flight on the old one get ``ConnectionLost``. State you
change yourself with :meth:`execute` (``SELECT``, ``CLIENT SETNAME``) is not restored.

``AsyncRedis`` (anyio: asyncio and trio) is shared by many tasks; a task that is cancelled, or
whose timeout runs out, abandons its reply: it is dropped when it arrives, never handed to
another task. If the abandoned command blocks on the server (``BLPOP``, ``XREAD``, ``WAIT``...)
the connection is closed instead, since the server would hold every later call behind it.
``Redis`` is for one thread at a time; a call whose timeout runs out closes the connection (the
late reply would otherwise be read by the next call).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote

import anyio
from typing_extensions import Self

from jobwire._pending import Pending
from jobwire._record import record
from jobwire._session import FifoSession
from jobwire._streams import SSLOption, tls_context
from jobwire._transport import AsyncTransport, Transport, connect_limit
from jobwire._url import (
    Address,
    AddressLike,
    address_url,
    describe,
    resolve_address,
    split_url,
)
from jobwire.errors import (
    ConnectionLost,
    InvalidAddress,
    JobwireError,
    LocalProtocolError,
)

from ._api_async import AsyncRedisCommands, Then
from ._api_sync import RedisCommands
from ._resp import (
    DEFAULT_MAX_ARRAY,
    DEFAULT_MAX_BULK,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_LINE,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MAX_REPLY_ITEMS,
    Arg,
    Connection,
    ConnectionClosed,
    ErrorReply,
    Push,
    Reply,
    command_name,
)
from .errors import AuthenticationError, RedisError, error_for

__all__ = [
    "DEFAULT_PORT",
    "AsyncRedis",
    "Redis",
    "RedisOptions",
    "RedisSession",
    "parse_redis_address",
]

DEFAULT_PORT = 6379
_log = logging.getLogger("qless_client.redis")
_QUERY_KEYS = frozenset({"db", "password", "username"})
#: Commands the server may hold back: abandoning one closes the connection (see the module).
_BLOCKING = frozenset({
    b"BLPOP", b"BRPOP", b"BRPOPLPUSH", b"BLMOVE", b"BLMPOP", b"BZPOPMIN", b"BZPOPMAX",
    b"BZMPOP", b"XREAD", b"XREADGROUP", b"WAIT", b"WAITAOF",
})


# -- addresses -----------------------------------------------------------------------------------


@record
class RedisOptions:
    """What a connection sends on connect (the handshake)."""

    db: int = 0
    username: str | None = None
    password: str | None = None
    protocol: int = 2
    client_name: str | None = None
    #: The address asked for TLS (``rediss://``).
    tls: bool = False

    def __repr__(self) -> str:  # never print the password
        hidden = "***" if self.password is not None else None
        return (f"RedisOptions(db={self.db}, username={self.username!r}, password={hidden}, "
                f"protocol={self.protocol}, client_name={self.client_name!r}, tls={self.tls})")

    def handshake(self) -> list[tuple[Arg, ...]]:
        """The commands a new connection sends before any other (maybe none)."""
        commands: list[tuple[Arg, ...]] = []
        if self.protocol == 3:
            hello: tuple[Arg, ...] = ("HELLO", "3")
            if self.password is not None:
                hello += ("AUTH", self.username or "default", self.password)
            if self.client_name is not None:
                hello += ("SETNAME", self.client_name)
            commands.append(hello)
        else:
            if self.password is not None:
                user = () if self.username is None else (self.username,)
                commands.append(("AUTH", *user, self.password))
            if self.client_name is not None:
                commands.append(("CLIENT", "SETNAME", self.client_name))
        if self.db:
            commands.append(("SELECT", self.db))
        return commands


def _db(value: object, where: object) -> int:
    """A database number: digits from a URL, an int from an argument."""
    if isinstance(value, str) and where is not None:
        if not value.isascii() or not value.isdigit():
            raise InvalidAddress(f"{where!r}: the database must be a number, not {value!r}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"the database must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidAddress(f"the database must be >= 0, not {value}")
    return value


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """Take Redis's own parts (userinfo, ``/db``, query) out of a URL; return the plain address
    URL jobwire's rule takes and the parts found."""
    parts = split_url(url)
    scheme = parts.scheme.lower()
    found: dict[str, str] = {}
    if parts.fragment:
        raise InvalidAddress(f"{url!r}: unexpected '#' fragment")
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if user:
            found["username"] = unquote(user)
        if colon and password:
            found["password"] = unquote(password)
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key not in _QUERY_KEYS:
            raise InvalidAddress(f"{url!r}: unknown query parameter {key!r} (db, password, "
                                 "username)")
        if key in found:
            raise InvalidAddress(f"{url!r}: {key} given twice")
        found[key] = value
    if scheme in ("redis", "rediss"):
        path = parts.path
        if path not in ("", "/"):
            if "db" in found:
                raise InvalidAddress(f"{url!r}: the database given twice (path and query)")
            found["db"] = path[1:]
        return f"redis://{hostport}", found
    # unix:///path or redis+unix:///path: the path stays, user info and query go.
    return f"{scheme}://{hostport}{parts.path}", found


def parse_redis_address(
    address: object,
    port: object = None,
    *,
    db: int | None = None,
    username: str | None = None,
    password: str | None = None,
    protocol: int = 2,
    client_name: str | None = None,
) -> tuple[Address, RedisOptions]:
    """The collection's address rule (``jobwire._url``) plus Redis's own URL parts.

    Accepted, besides every form of the collection's rule (``("host", 6379)``,
    ``"host:port"``, ``"host"``, a unix path, host and ``port``)::

        redis://[[user]:password@]host[:port][/db][?db=N&password=...&username=...]
        unix:///path/to/redis.sock?db=N&password=...&username=...   (also redis+unix://)
        rediss://...                  the same, over TLS (the certificate is checked)

    ``db``, ``username`` and ``password`` may also be given as arguments, but not both ways.

    Raises:
        TypeError: a value of a type no form takes.
        InvalidAddress: a malformed address, an unknown query parameter, a value given twice,
            a database that is not a number >= 0, or a username without a password.
        LocalProtocolError: ``protocol`` is not 2 or 3, or ``client_name`` holds a space.
    """
    found: dict[str, str] = {}
    target = address
    tls = False
    if isinstance(address, str) and "://" in address:
        scheme = address.partition("://")[0].lower()
        if scheme in ("redis", "rediss", "unix", "redis+unix"):
            target, found = _split_url(address)
            tls = scheme == "rediss"
    resolved = resolve_address(target, port, scheme="redis", default_port=DEFAULT_PORT)
    given = {"db": db, "username": username, "password": password}
    for key, value in given.items():
        if value is not None and key in found:
            raise InvalidAddress(f"{address!r}: {key} given in the URL and as an argument")
    number = _db(found["db"], address) if "db" in found else _db(0 if db is None else db, None)
    user = found.get("username", username)
    secret = found.get("password", password)
    for key, value in (("username", user), ("password", secret), ("client_name", client_name)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{key} must be a str, not {type(value).__name__}")
    if secret == "":
        secret = None
    if user is not None and secret is None:
        raise InvalidAddress(f"{address!r}: a username needs a password (AUTH takes both)")
    if isinstance(protocol, bool) or protocol not in (2, 3):
        raise LocalProtocolError(f"protocol must be 2 (RESP2) or 3 (RESP3), not {protocol!r}")
    if client_name is not None and (not client_name or any(c <= " " for c in client_name)):
        raise LocalProtocolError(f"client_name {client_name!r}: Redis refuses empty names and "
                                 "spaces, newlines or control characters in them")
    return resolved, RedisOptions(number, user, secret, protocol, client_name, tls)


# -- the session: match replies to callers (no I/O) ----------------------------------------------


class RedisSession(FifoSession[Pending[Any]]):
    """One connection's core plus the FIFO of callers awaiting replies.

    An error reply rejects its caller's Pending with a :class:`RedisError`; a push goes to
    ``on_push`` (dropped if there is none); attributes are dropped. A protocol error or the
    server closing fails every waiting caller (``FifoSession``).
    """

    __slots__ = ("on_push",)
    closed_event = ConnectionClosed

    def __init__(
        self,
        *,
        max_bulk: int = DEFAULT_MAX_BULK,
        max_line: int = DEFAULT_MAX_LINE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_array: int = DEFAULT_MAX_ARRAY,
        max_reply_items: int = DEFAULT_MAX_REPLY_ITEMS,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        on_push: Callable[[Push], None] | None = None,
    ) -> None:
        super().__init__()
        self.conn = Connection(
            max_bulk=max_bulk, max_line=max_line, max_depth=max_depth, max_array=max_array,
            max_reply_items=max_reply_items, max_reply_bytes=max_reply_bytes,
        )
        self.on_push = on_push

    def submit(self, args: Sequence[Arg]) -> Pending[Any]:
        """Queue one command for sending and return its Pending.

        Raises:
            ConnectionLost: the connection is already broken or closed.
            LocalProtocolError: the command cannot be sent (nothing is queued).
        """
        self.check_usable()
        self.queue(self.conn.send(args))
        pending: Pending[Any] = Pending(command_name(args))
        self.expect(pending)
        return pending

    def submit_encoded(self, data: bytes, name: str = "pipelined command") -> Pending[Any]:
        """:meth:`submit` for a command from ``encode_command`` (pipelines, scripts), named
        ``name`` in messages."""
        if self.broken is not None:
            self.check_usable()  # raises
        self.queue(self.conn.send_encoded(data, name))
        pending: Pending[Any] = Pending(name)
        self._fifo.append(pending)
        return pending

    def dispatch(self, event: Any) -> None:
        """Complete the oldest Pending with a reply or an error; route pushes."""
        kind = type(event)
        if kind is Reply:
            self._fifo.popleft().resolve(event.value)
        elif kind is ErrorReply:
            self._fifo.popleft().reject(error_for(event.message))
        elif kind is Push and self.on_push is not None:
            try:
                self.on_push(event)
            except Exception:  # a callback's bug must not stall the replies behind the push
                _log.exception("on_push raised on %r", event)
        # Attribute: metadata about the next reply, which nothing here uses.


def _submit_then(session: RedisSession) -> Callable[[tuple[bytes, Then]], Pending[Any]]:
    """A pipeline's ``submit`` for ``(encoded command, then)`` items: each command's Pending
    gets its ``then``."""
    submit = session.submit_encoded

    def submit_then(item: tuple[bytes, Then]) -> Pending[Any]:
        pending = submit(item[0])
        pending.then = item[1]
        return pending

    return submit_then


def _blocks(args: Sequence[Arg]) -> bool:
    head = args[0] if args else b""
    if isinstance(head, str):
        head = head.encode("utf-8", "replace")
    return isinstance(head, bytes) and head.upper() in _BLOCKING


def _handshake_error(command: tuple[Arg, ...], error: JobwireError) -> JobwireError:
    """Any refusal of ``AUTH`` is about the credentials (Redis 7 answers a password it does not
    want with ``ERR AUTH <password> called without any password configured ...``)."""
    if command[0] == "AUTH" and isinstance(error, RedisError) and (
        not isinstance(error, AuthenticationError)
    ):
        return AuthenticationError(error.message)
    return error


class _Base:
    """What both clients share: options, caps, the session factory."""

    def __init__(
        self,
        address: AddressLike,
        port: int | None,
        *,
        db: int | None,
        username: str | None,
        password: str | None,
        protocol: int,
        client_name: str | None,
        timeout: float | None,
        connect_timeout: float | None,
        max_bulk: int,
        max_line: int,
        max_depth: int,
        max_array: int,
        max_reply_items: int,
        max_reply_bytes: int,
        on_push: Callable[[Push], None] | None,
        ssl: SSLOption,
        server_hostname: str | None,
    ) -> None:
        self.address, self.options = parse_redis_address(
            address, port, db=db, username=username, password=password, protocol=protocol,
            client_name=client_name,
        )
        if self.options.tls and ssl is False:
            raise InvalidAddress(f"{address!r}: a rediss:// address with ssl=False")
        #: TLS: ``ssl=`` as given, or ``True`` for a ``rediss://`` address.
        self.ssl_context = tls_context(True if ssl is None and self.options.tls else ssl)
        self.server_hostname = server_hostname
        self.timeout = timeout
        self.connect_timeout = connect_limit(connect_timeout, timeout)
        self._caps = {"max_bulk": max_bulk, "max_line": max_line, "max_depth": max_depth,
                      "max_array": max_array, "max_reply_items": max_reply_items,
                      "max_reply_bytes": max_reply_bytes}
        self._on_push = on_push
        self._scripts: dict[str, bytes] = {}
        self._closed = False
        #: How many connections this object has opened (reconnects included).
        self.connections = 0
        self._new_session()  # checks the caps now, not on the first call

    def _new_session(self) -> RedisSession:
        self._session = RedisSession(on_push=self._on_push, **self._caps)
        return self._session

    def _limit(self, wait: float | None) -> float | None:
        return None if wait is None or self.timeout is None else wait + self.timeout

    def _where(self) -> str:
        """The server as a URL, with the database but never the credentials (for ``repr``)."""
        options = self.options
        url = address_url(self.address, "rediss" if options.tls else "redis")
        if options.db:
            url += f"?db={options.db}" if url.startswith("unix:") else f"/{options.db}"
        return url

    def __repr__(self) -> str:  # never the password
        options = self.options
        return describe(
            self, self._where(),
            "" if options.username is None else f"user={options.username!r}",
            "" if options.protocol == 2 else f"protocol={options.protocol}",
            "" if options.client_name is None else f"client_name={options.client_name!r}",
            "tls" if self.ssl_context is not None and not options.tls else "",
            "closed" if self._closed else "",
        )


_ARGS_DOC = """
    Args:
        address: the server: ``"redis://[[user]:password@]host[:port][/db]"``,
            ``"unix:///path?db=N&password=..."``, ``"host:port"``, ``("host", port)``,
            ``"host"`` (port 6379), a unix socket path, or a host with ``port``
            (:func:`parse_redis_address`).
        port: the port, when ``address`` is a bare host.
        db: the database to ``SELECT`` on connect (default 0).
        username, password: the credentials to send on connect (an ACL user needs both).
        protocol: 2 (RESP2, the default) or 3 (``HELLO 3``: maps, sets, doubles, pushes...).
        client_name: a name for ``CLIENT LIST`` (sent on connect).
        timeout: seconds a reply may take (beyond a blocking command's ``wait``); ``None`` for
            no limit. Running out raises ``OperationTimeout``.
        connect_timeout: seconds to connect and run the TLS and Redis handshakes (default:
            ``timeout``, or 10 when that is ``None``: a connect is always bounded).
        max_bulk, max_line, max_depth, max_array: caps on what the server may send (``_resp``).
        max_reply_items, max_reply_bytes: caps on one whole reply, at every level of nesting:
            values (default 2**20) and bytes on the wire (default 1 GiB).
        on_push: called with each RESP3 :class:`Push` (in whichever task reads; what it raises
            is logged to ``qless_client.redis`` and dropped); without it pushes are dropped.
        ssl: TLS: ``True`` (the default context: certificate and host name checked) or an
            ``ssl.SSLContext``; a ``rediss://`` address means ``True``. A refused certificate
            raises ``jobwire.TLSError``; there is never a plaintext fallback.
        server_hostname: the name the server's certificate must carry (default: the host).
"""


class AsyncRedis(_Base, AsyncRedisCommands):
    """An async connection to a Redis server, shared by many tasks (anyio: asyncio or trio).

    ``async with AsyncRedis("redis://127.0.0.1:6379/0") as redis:`` connects and closes;
    without the context manager, the first call connects.
    """

    __doc__ = (__doc__ or "") + _ARGS_DOC + """
    Raises:
        TypeError, InvalidAddress, LocalProtocolError: the address or an
            option is invalid (nothing is sent).
    """

    def __init__(
        self,
        address: AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        db: int | None = None,
        username: str | None = None,
        password: str | None = None,
        protocol: int = 2,
        client_name: str | None = None,
        timeout: float | None = 10.0,
        connect_timeout: float | None = None,
        max_bulk: int = DEFAULT_MAX_BULK,
        max_line: int = DEFAULT_MAX_LINE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_array: int = DEFAULT_MAX_ARRAY,
        max_reply_items: int = DEFAULT_MAX_REPLY_ITEMS,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        on_push: Callable[[Push], None] | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        super().__init__(
            address, port, db=db, username=username, password=password, protocol=protocol,
            client_name=client_name, timeout=timeout, connect_timeout=connect_timeout,
            max_bulk=max_bulk, max_line=max_line, max_depth=max_depth, max_array=max_array,
            max_reply_items=max_reply_items, max_reply_bytes=max_reply_bytes,
            on_push=on_push, ssl=ssl, server_hostname=server_hostname,
        )
        self._transport = AsyncTransport(
            self.address, self._session, connect_timeout=self.connect_timeout,
            ssl=self.ssl_context, server_hostname=self.server_hostname,
        )
        self._handshaken: AsyncTransport | None = None  # the transport whose handshake is done
        self._lock: anyio.Lock | None = None

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> AsyncRedis:
        """Build a client from a ``redis://`` or ``unix://`` URL; ``kwargs`` as for the
        constructor.

        Raises:
            InvalidAddress: as for the constructor.
        """
        return cls(url, **kwargs)

    async def connect(self) -> None:
        """Open the connection and run the handshake now (a no-op when done); open a new one
        if the last one ended.

        Raises:
            ConnectFailed: the server cannot be reached.
            AuthenticationError: the server refused the credentials.
            RedisError: the server refused another handshake command (``SELECT``, ``HELLO``).
            OperationTimeout: the handshake took longer than ``connect_timeout``.
            ConnectionLost: the client was closed.
        """
        if self._handshaken is self._transport and not self._transport.closed:
            return
        if self._closed:
            raise ConnectionLost("client is closed")
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._closed:
                raise ConnectionLost("client is closed")
            if self._transport.closed:  # broken: start over on a new connection
                self._transport = AsyncTransport(
                    self.address, self._new_session(), connect_timeout=self.connect_timeout,
                    ssl=self.ssl_context, server_hostname=self.server_hostname,
                )
            transport = self._transport
            if self._handshaken is transport:
                return
            await transport.connect()
            self.connections += 1
            try:
                await self._handshake(transport)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await transport.aclose()
                raise
            self._handshaken = transport

    async def _handshake(self, transport: AsyncTransport) -> None:
        commands = self.options.handshake()
        if not commands:
            return
        pendings = [self._session.submit(command) for command in commands]
        await transport.flush()
        for command, pending in zip(commands, pendings, strict=True):
            await transport.wait_done(pending, self.connect_timeout)
            if pending.error is not None:
                raise _handshake_error(command, pending.error)

    async def aclose(self) -> None:
        """Close the connection; calls still waiting get ``ConnectionLost``."""
        self._closed = True
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the transport: move bytes, nothing else -----------------------------------------------

    async def _call(
        self, args: Sequence[Arg], wait: float | None = 0.0, then: Then | None = None
    ) -> Any:
        await self.connect()
        transport = self._transport
        pending = self._session.submit(args)
        if then is not None:
            pending.then = then
        try:
            return await transport.call(pending, self._limit(wait))
        except BaseException:
            if not pending.done and _blocks(args):
                # The server still holds the abandoned command and every call queued behind
                # it: start over on a new connection instead.
                with anyio.CancelScope(shield=True):
                    await transport.aclose()
            raise

    async def _call_encoded(self, data: bytes, name: str, then: Then | None = None) -> Any:
        await self.connect()
        transport = self._transport
        pending = self._session.submit_encoded(data, name)
        if then is not None:
            pending.then = then
        return await transport.call(pending, self._limit(0.0))

    async def _call_many(
        self, commands: Iterable[bytes], window: int, thens: Iterable[Then] | None = None
    ) -> list[Pending[Any]]:
        await self.connect()
        if thens is None:
            return await self._transport.pipeline(
                self._session.submit_encoded, commands, window, self._limit(0.0)
            )
        return await self._transport.pipeline(
            _submit_then(self._session), zip(commands, thens, strict=True), window,
            self._limit(0.0),
        )


class Redis(_Base, RedisCommands):
    """A blocking connection to a Redis server, opened (handshake included) by the
    constructor; for one thread at a time.
    """

    __doc__ = (__doc__ or "") + _ARGS_DOC + """
    Raises:
        TypeError, InvalidAddress, LocalProtocolError: the address or an
            option is invalid (nothing is sent).
        ConnectFailed: the server cannot be reached.
        AuthenticationError, RedisError: the server refused the handshake.
    """

    def __init__(
        self,
        address: AddressLike = "127.0.0.1",
        port: int | None = None,
        *,
        db: int | None = None,
        username: str | None = None,
        password: str | None = None,
        protocol: int = 2,
        client_name: str | None = None,
        timeout: float | None = 10.0,
        connect_timeout: float | None = None,
        max_bulk: int = DEFAULT_MAX_BULK,
        max_line: int = DEFAULT_MAX_LINE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_array: int = DEFAULT_MAX_ARRAY,
        max_reply_items: int = DEFAULT_MAX_REPLY_ITEMS,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        on_push: Callable[[Push], None] | None = None,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        super().__init__(
            address, port, db=db, username=username, password=password, protocol=protocol,
            client_name=client_name, timeout=timeout, connect_timeout=connect_timeout,
            max_bulk=max_bulk, max_line=max_line, max_depth=max_depth, max_array=max_array,
            max_reply_items=max_reply_items, max_reply_bytes=max_reply_bytes,
            on_push=on_push, ssl=ssl, server_hostname=server_hostname,
        )
        self._open()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Redis:
        """Connect to a ``redis://`` or ``unix://`` URL; ``kwargs`` as for the constructor.

        Raises:
            InvalidAddress: as for the constructor.
        """
        return cls(url, **kwargs)

    def _open(self) -> None:
        session = self._new_session()
        self._transport = Transport(
            self.address, session, timeout=self.timeout, connect_timeout=self.connect_timeout,
            ssl=self.ssl_context, server_hostname=self.server_hostname,
        )
        self._transport.connect()
        self.connections += 1
        commands = self.options.handshake()
        if not commands:
            return
        try:
            pendings = [session.submit(command) for command in commands]
            self._transport.flush()
            for command, pending in zip(commands, pendings, strict=True):
                self._transport.wait_done(pending, self.connect_timeout)
                if pending.error is not None:
                    raise _handshake_error(command, pending.error)
        except BaseException:
            self._transport.close()
            raise

    def connect(self) -> None:
        """Open a new connection (with its handshake) if the last one ended; a no-op when
        connected.

        Raises:
            ConnectFailed, AuthenticationError: as for the constructor.
            ConnectionLost: the client was closed.
        """
        self._ready()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._closed = True
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the transport: move bytes, nothing else -----------------------------------------------

    def _ready(self) -> Transport:
        if self._closed:
            raise ConnectionLost("client is closed")
        if not self._transport.connected:  # ended, or the last connect failed: try again
            self._transport.close()
            self._open()
        return self._transport

    def _call(
        self, args: Sequence[Arg], wait: float | None = 0.0, then: Then | None = None
    ) -> Any:
        transport = self._ready()
        pending = self._session.submit(args)
        if then is not None:
            pending.then = then
        return transport.call(pending, self._limit(wait))

    def _call_encoded(self, data: bytes, name: str, then: Then | None = None) -> Any:
        transport = self._ready()
        pending = self._session.submit_encoded(data, name)
        if then is not None:
            pending.then = then
        return transport.call(pending, self._limit(0.0))

    def _call_many(
        self, commands: Iterable[bytes], window: int, thens: Iterable[Then] | None = None
    ) -> list[Pending[Any]]:
        transport = self._ready()
        if thens is None:
            return transport.pipeline(
                self._session.submit_encoded, commands, window, self._limit(0.0)
            )
        return transport.pipeline(
            _submit_then(self._session), zip(commands, thens, strict=True), window,
            self._limit(0.0),
        )
