# GENERATED from _api_async.py by scripts/unasync.py: do not edit.
"""The Gearman client and admin commands as async methods: the single source of the client API.

``_api_sync.py`` is generated from this file by ``scripts/unasync.py`` (a test fails when the two
drift apart). Each method builds a validated packet, sends it through one server's session and
transport (:mod:`jobwire._transport`), and shapes the answer; all protocol rules live in the
Sans-IO core, all I/O in the transport.

Several servers: a job with a unique id goes to the server chosen for it by rendezvous
(highest-random-weight) hashing, so coalescing works across servers and clients, whatever the
order of their lists, and adding a server moves only the ids it now wins; other requests
round-robin. A server that cannot be reached is skipped (fail-over, in the order of the
weights) and retried only after a jittered back-off. A connection that broke is replaced on the
next call (never silently mid-call).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import EllipsisType
from typing import Any, Generic, Literal, overload

from typing_extensions import Self, TypeVar

from jobwire._backoff import Backoff
from jobwire._numbers import parse_uint
from jobwire._streams import SSLOption, tls_context
from jobwire._transport import connect_limit
from jobwire._url import (
    Address,
    AddressLike,
    InvalidAddress,
    TCPAddress,
    address_url,
    describe,
    resolve_address,
    resolve_addresses,
)
from jobwire.errors import (
    ConnectFailed,
    ConnectionLost,
    JobwireConnectionError,
    LocalProtocolError,
    NotSent,
    OperationTimeout,
    RemoteProtocolError,
    TLSError,
)
from jobwire.serializers import (
    DeserializationError,
    Serializer,
    detail,
    dump,
    load,
    or_raw,
)

from . import _admin as adm
from . import _packets as pk
from ._backends import Backend, Transport
from ._packets import Priority
from ._session import AdminSession, GearmanSession, JobTracker, Update
from .errors import BulkSubmitError, ServerError

__all__ = ["Admin", "Client", "JobStatus", "as_bytes"]

DEFAULT_PORT = 4730
#: Background submits in flight at once in :meth:`Client.submit_background_many`.
DEFAULT_WINDOW = 512
#: Handles remembered per multi-server client to send GET_STATUS to the right server.
_MAX_REMEMBERED = 100_000
#: Requests some servers never answer (OpenStack gear's ``gear.Server``; docs/gearman.md,
#: "Peers"). When the wait for one runs out, its answer may never come, and the connection's
#: next answer would be taken for it: the connection is closed (the next call opens another).
_MAY_GO_UNANSWERED: frozenset[type[pk.Packet]] = frozenset({
    pk.EchoReq, pk.GetStatusUnique, pk.SubmitJobEpoch, pk.SubmitReduceJob,
    pk.SubmitReduceJobBackground,
})

#: The type of job data and results: ``bytes`` unless a ``serializer=`` says otherwise.
B = TypeVar("B", default=bytes)


def as_bytes(value: str | bytes, what: str) -> bytes:
    """UTF-8 for ``str``; ``bytes`` as given.

    Raises:
        LocalProtocolError: neither str nor bytes.
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise LocalProtocolError(f"{what} must be str or bytes, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class JobStatus:
    """A job's status (STATUS_RES or STATUS_RES_UNIQUE).

    ``known`` is False when the server holds no such job (finished, or never existed);
    ``client_count`` is only set by :meth:`Client.get_status_unique`.
    """

    handle: bytes | None
    unique: bytes | None
    known: bool
    running: bool
    numerator: int
    denominator: int
    client_count: int | None = None


def _epoch(at: datetime | float | int) -> int:
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise LocalProtocolError("at= needs a timezone-aware datetime")
        return int(at.timestamp())
    if isinstance(at, (int, float)) and not isinstance(at, bool) and at >= 0:
        return int(at)
    raise LocalProtocolError(f"at= must be an aware datetime or a unix time, got {at!r}")


def _data(serializer: Serializer[B], data: B | None, what: str = "data") -> bytes:
    """A job's data as sent: ``None`` is empty, anything else goes through ``serializer``.

    Raises:
        SerializationError: the serializer cannot write ``data``.
    """
    return b"" if data is None else dump(serializer, data, what)


def _bulk_packet(
    index: int, job: tuple[str | bytes, B], serializer: Serializer[B], priority: Priority,
    background: bool,
) -> pk.Packet:
    """The submit packet of one job of a bulk call, checked (nothing is sent for a bad one).

    Raises:
        LocalProtocolError: not a ``(function, data)`` pair, or an invalid function.
        SerializationError: the serializer cannot write the data.
    """
    try:
        function, data = job
    except (TypeError, ValueError):
        raise LocalProtocolError(f"a job must be a (function, data) pair, got {job!r}") from None
    packet = pk.submit_packet(as_bytes(function, "function"),
                              _data(serializer, data, f"the data of job {index}"),
                              priority=priority, background=background)
    packet.validate()
    return packet


ServersLike = AddressLike | Sequence[AddressLike]


def _addresses(servers: ServersLike, port: int | None = None) -> list[Address]:
    """The servers in any form the collection takes (a list, a comma-separated string, one
    address), or one bare host with ``port``.

    Raises:
        TypeError, InvalidAddress: not a server address (nothing is sent).
    """
    if port is not None:
        return [resolve_address(servers, port, scheme="gearman", default_port=DEFAULT_PORT)]
    return resolve_addresses(servers, scheme="gearman", default_port=DEFAULT_PORT)


def _server_seed(address: Address) -> hashlib.blake2b:
    """The hash state a server's weights start from: its address as written in the server list
    (``host:port``, the host in lower case; ``unix:/path``), length-prefixed."""
    name = (str(address).lower() if isinstance(address, TCPAddress) else str(address)).encode()
    return hashlib.blake2b(len(name).to_bytes(4, "big") + name, digest_size=8)


class _ServerSlot:
    """One server: its current connection (replaced after it breaks) and back-off."""

    def __init__(self, address: Address) -> None:
        self.address = address
        self.seed = _server_seed(address)
        self.transport: Transport | None = None
        self.session: GearmanSession | None = None
        self.backoff = Backoff(base=0.05, cap=5.0)
        self.retry_at = 0.0
        self.failure: JobwireConnectionError | None = None  # why it is backing off
        self.lock = Backend.new_lock()  # one connect at a time per server


class _Pool:
    """The servers of a client and how to reach one."""

    def __init__(
        self, servers: list[Address], *, timeout: float | None,
        connect_timeout: float | None, max_body_size: int, exceptions: bool,
        ssl: SSLOption = None, server_hostname: str | None = None,
    ) -> None:
        self.servers = [_ServerSlot(a) for a in servers]
        self._single = self.servers[0] if len(self.servers) == 1 else None
        self.timeout = timeout
        self.connect_timeout = connect_limit(connect_timeout, timeout)
        self.ssl_context = tls_context(ssl)  # one context for every server
        self.server_hostname = server_hostname
        self.max_body_size = max_body_size
        self.exceptions = exceptions
        self._next = 0
        self._closed = False

    def order(self, route: bytes | None) -> list[_ServerSlot]:
        """The servers to try for a request, first choice first.

        With a ``route`` (a unique id): rendezvous hashing. Each server's weight for the id is
        a 64-bit BLAKE2b hash of the server's address and the id, and the servers are tried
        from the highest weight down. Every client that lists the same servers (in any order)
        sends the id to the same one; a new server takes only the ids for which it weighs
        most (about 1/n of them) and no id moves between the old ones; when the first choice
        is down, the id goes to its second, which is the server a client that never knew the
        first would pick. Without a route: round-robin.
        """
        n = len(self.servers)
        if n == 1:
            return list(self.servers)
        if route:
            def weight(server: _ServerSlot) -> bytes:
                digest = server.seed.copy()
                digest.update(route)
                return digest.digest()

            return sorted(self.servers, key=weight, reverse=True)
        start = self._next % n
        self._next += 1
        return [self.servers[(start + i) % n] for i in range(n)]

    def connect(self, server: _ServerSlot) -> tuple[Transport, GearmanSession]:
        """The server's open connection, or a new one (not before its back-off ran out).

        Raises:
            ConnectFailed, ConnectionLost: the server cannot be reached now.
        """
        transport, session = server.transport, server.session
        if transport is not None and session is not None and not transport.closed:
            return transport, session  # the common case: no lock needed
        with server.lock:
            return self._connect_locked(server)

    def _connect_locked(
        self, server: _ServerSlot
    ) -> tuple[Transport, GearmanSession]:
        if self._closed:
            raise ConnectFailed("client is closed")
        if (
            server.transport is not None and server.session is not None
            and not server.transport.closed
        ):
            return server.transport, server.session
        now = Backend.monotonic()
        if now < server.retry_at:
            # The same kind of error as the failure (a refused certificate stays a TLSError).
            kind = TLSError if isinstance(server.failure, TLSError) else ConnectFailed
            raise kind(f"{server.address} is backing off after a failure: {server.failure}")
        session = GearmanSession(max_body_size=self.max_body_size)
        transport = Transport(
            server.address, session, connect_timeout=self.connect_timeout,
            ssl=self.ssl_context, server_hostname=self.server_hostname,
        )
        try:
            transport.connect()
            if self.exceptions:
                session.request(pk.OptionReq(b"exceptions"))
                transport.flush()
        except JobwireConnectionError as exc:
            server.retry_at = Backend.monotonic() + server.backoff.next_delay()
            server.failure = exc
            raise
        server.backoff.reset()
        server.failure = None
        server.transport, server.session = transport, session
        return transport, session

    def ready(self) -> tuple[Transport, GearmanSession] | None:
        """The open connection of a one-server pool (no await, no lock), or None: then
        :meth:`pick` (it connects, or fails over)."""
        if self._single is not None:
            transport, session = self._single.transport, self._single.session
            if transport is not None and session is not None and not transport.closed:
                return transport, session
        return None

    def pick(self, route: bytes | None) -> tuple[Transport, GearmanSession]:
        """A connection to the server for ``route``, failing over to the next ones.

        Raises:
            ConnectFailed: no server could be reached.
        """
        _, transport, session = self.pick_server(route)
        return transport, session

    def pick_server(
        self, route: bytes | None
    ) -> tuple[_ServerSlot, Transport, GearmanSession]:
        """As :meth:`pick`, also saying which server answered.

        Raises:
            ConnectFailed: no server could be reached; ``TLSError`` (a ``ConnectFailed``) when
                one of them refused TLS (its certificate, host name or handshake).
        """
        error: Exception | None = None
        refused: TLSError | None = None
        for server in self.order(route):
            try:
                transport, session = self.connect(server)
                return server, transport, session
            except JobwireConnectionError as exc:
                error = exc
                if isinstance(exc, TLSError):
                    refused = exc
        if refused is not None:
            raise TLSError(f"no Gearman server reachable: {refused}") from refused
        raise ConnectFailed(f"no Gearman server reachable: {error}")

    def close(self) -> None:
        self._closed = True
        for server in self.servers:
            if server.transport is not None:
                server.transport.close()
            server.transport = server.session = None


class Client(Generic[B]):
    """A Gearman client for one or several servers.

    Args:
        servers: one server or several: a list, or a comma-separated string as libgearman's
            ``--servers`` takes; each as ``"host:port"``, ``"host"`` (port 4730),
            ``("host", port)`` or ``gearman://host[:port]`` (the collection's address rule).
        port: the port, when ``servers`` is one bare host.
        timeout: seconds an answer may take (``None``: no limit); each call may override it.
        connect_timeout: seconds to connect and finish the TLS handshake (default:
            ``timeout``, or 10 when that is ``None``: a connect is always bounded).
        max_body_size: largest packet accepted from a server (64 MiB).
        ssl: TLS: ``True`` (the default context: certificate and host name checked) or an
            ``ssl.SSLContext``, the same for every server; ``None``/``False``: plain. A refused
            certificate raises ``jobwire.TLSError`` (a ``ConnectFailed``) on the call that
            connects; there is never a plaintext fallback.
        server_hostname: the name the server's certificate must carry (default: the host of
            each server).
        serializer: how job data and results become bytes and back
            (``jobwire.serializers``): ``TEXT`` for ``str``, ``JSON`` for JSON values, or your
            own; default: bytes as they are. A submit raises ``SerializationError`` for data
            it cannot write; a result it cannot read raises ``DeserializationError`` (with
            the job's handle). Updates (WORK_DATA, WORK_WARNING) and WORK_EXCEPTION data stay
            bytes.
        exceptions: send OPTION_REQ ``exceptions`` on each connection, so that gearmand
            forwards a worker's WORK_EXCEPTION, raised as
            :class:`~gearman_client.errors.JobException` with its data. Off by default: no
            option is sent that is not asked for. Without it gearmand turns WORK_EXCEPTION into
            WORK_FAIL, raised as ``JobFailed``. A server that does not answer the option
            (OpenStack gear's) is fine: its next reply answers the next request.

    With several servers, a job with a unique id goes to the server picked by rendezvous
    (highest-random-weight) hashing: every server gets a weight for the id, a 64-bit BLAKE2b
    hash of the server's ``host:port`` and the id, and the highest wins (the next ones are the
    fail-over order). Clients that list the same servers, in any order and spelt the same way,
    send an id to the same server, so its jobs coalesce; adding a server moves only the ids it
    now wins (about 1/n), all to itself. Jobs without a unique id go round-robin.

    Raises:
        TypeError, InvalidAddress: ``servers`` is not a server address or a list of them, or
            ``ssl`` is not a bool or an ``ssl.SSLContext`` (TypeError).
    """

    def __init__(
        self, servers: ServersLike = "127.0.0.1:4730", port: int | None = None, *,
        timeout: float | None = 10.0, connect_timeout: float | None = None,
        max_body_size: int = pk.DEFAULT_MAX_BODY_SIZE,
        ssl: SSLOption = None, server_hostname: str | None = None,
        serializer: Serializer[B] | None = None, exceptions: bool = False,
    ) -> None:
        self.timeout = timeout
        self._serializer = or_raw(serializer)
        self._pool = _Pool(_addresses(servers, port), timeout=timeout,
                           connect_timeout=connect_timeout, max_body_size=max_body_size,
                           exceptions=exceptions, ssl=ssl, server_hostname=server_hostname)
        self.connect_timeout = self._pool.connect_timeout
        #: The TLS context of ``ssl=`` (``None``: plain TCP), and the name asked for.
        self.ssl_context = self._pool.ssl_context
        self.server_hostname = server_hostname
        # Which server created a handle (for get_status), most recent last, bounded.
        self._handles: OrderedDict[bytes, _ServerSlot] = OrderedDict()

    def _remember(self, handle: bytes, server: _ServerSlot) -> None:
        if len(self._pool.servers) > 1:
            self._handles[handle] = server
            if len(self._handles) > _MAX_REMEMBERED:
                self._handles.popitem(last=False)

    def __repr__(self) -> str:
        servers = ",".join(address_url(s.address, "gearman") for s in self._pool.servers)
        return describe(self, servers, detail(self._serializer),
                        "tls" if self.ssl_context is not None else "",
                        "closed" if self._pool._closed else "")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection; callers still waiting get ``ConnectionLost``."""
        self._pool.close()

    def _limit(self, timeout: float | EllipsisType | None) -> float | None:
        return self.timeout if isinstance(timeout, EllipsisType) else timeout

    def _call(
        self, packet: pk.Packet, route: bytes | None, limit: float | None,
        server: _ServerSlot | None = None,
    ) -> tuple[Any, _ServerSlot]:
        """Send ``packet`` to ``server`` (or the one ``route`` picks) and return its answer."""
        if server is None:
            server, transport, session = self._pool.pick_server(route)
        else:
            transport, session = self._pool.connect(server)
        pending = session.request(packet)
        try:
            reply = transport.call(pending, limit)
        except OperationTimeout:
            if type(packet) in _MAY_GO_UNANSWERED:
                transport.close()
            raise
        return reply, server

    def submit(
        self, function: str | bytes, data: B | None = None, *,
        unique: str | bytes | None = None, priority: Priority = Priority.NORMAL,
        timeout: float | EllipsisType | None = ...,
        on_update: Callable[[Update], None] | None = None,
    ) -> B:
        """Run a job and return its result (the WORK_COMPLETE data, through the serializer).

        ``data`` goes through the client's serializer (``None``: no data).

        Sends SUBMIT_JOB (or _HIGH/_LOW) to the server chosen by ``unique``; ``on_update`` gets
        every WORK_DATA, WORK_WARNING and WORK_STATUS while the job runs.

        Raises:
            JobFailed: WORK_FAIL. JobException: WORK_EXCEPTION (``.data``).
            QueueFull, ServerError: the server refused the job.
            OperationTimeout: no result within ``timeout`` seconds (default: the client's).
            LocalProtocolError: invalid function name, unique or priority.
            SerializationError: the serializer cannot write ``data`` (nothing sent).
            DeserializationError: the serializer cannot read the result (``.data``).
            ConnectFailed, ConnectionLost: no server, or the connection died while it ran.
        """
        uniq = b"" if unique is None else as_bytes(unique, "unique")
        packet = pk.submit_packet(as_bytes(function, "function"),
                                  _data(self._serializer, data), unique=uniq, priority=priority)
        limit = self.timeout if timeout is ... else timeout
        transport, session = self._pool.ready() or self._pool.pick(uniq or None)
        job = session.submit(packet, on_update)  # a refused submit fails the job
        try:
            raw = transport.call(job, limit)
        finally:
            if not job.done and job.handle is not None:  # given up: forget the job's updates
                session.untrack(job.handle, job)
        return load(self._serializer, raw, job.handle, "result")

    def submit_background(
        self, function: str | bytes, data: B | None = None, *,
        unique: str | bytes | None = None, priority: Priority = Priority.NORMAL,
        at: datetime | float | None = None, timeout: float | EllipsisType | None = ...,
    ) -> bytes:
        """Queue a background job and return its handle.

        Sends SUBMIT_JOB_BG (_HIGH_BG/_LOW_BG), or SUBMIT_JOB_EPOCH when ``at`` (an aware
        datetime or a unix time) is given; ``priority`` must then be NORMAL. ``data`` goes
        through the client's serializer (``None``: no data).

        Raises:
            QueueFull: the function's queue is at its ``maxqueue`` limit.
            ServerError: the server refused the job.
            LocalProtocolError: invalid arguments (nothing sent).
            SerializationError: the serializer cannot write ``data`` (nothing sent).
            OperationTimeout: no JOB_CREATED within ``timeout`` seconds.
            ConnectFailed: no server could be reached.
            ConnectionLost: the connection closed before JOB_CREATED.
        """
        packet = self._background_packet(function, data, unique, priority, at)
        route: bytes = packet.unique  # type: ignore[attr-defined]
        reply, server = self._call(packet, route or None, self._limit(timeout))
        self._remember(reply.handle, server)
        return reply.handle  # type: ignore[no-any-return]

    def _background_packet(
        self, function: str | bytes, data: B | None, unique: str | bytes | None,
        priority: Priority, at: datetime | float | None,
    ) -> pk.Packet:
        uniq = b"" if unique is None else as_bytes(unique, "unique")
        fn, body = as_bytes(function, "function"), _data(self._serializer, data)
        if at is not None:
            if priority is not Priority.NORMAL:
                raise LocalProtocolError("SUBMIT_JOB_EPOCH has no priority: use NORMAL with at=")
            return pk.SubmitJobEpoch(fn, uniq, _epoch(at), body)
        return pk.submit_packet(fn, body, unique=uniq, priority=priority, background=True)

    def submit_background_many(
        self, jobs: Iterable[tuple[str | bytes, B]], *,
        priority: Priority = Priority.NORMAL, window: int = DEFAULT_WINDOW,
        timeout: float | EllipsisType | None = ...,
    ) -> list[bytes]:
        """Queue many ``(function, data)`` background jobs, pipelined with at most ``window``
        unanswered submits on one connection; returns the handles in order.

        Raises:
            LocalProtocolError: an invalid job (every job is checked before any is sent).
            BulkSubmitError: some jobs were not queued (a :class:`jobwire.errors.BulkError`):
                ``.results`` has, per job, its handle or its exception: the server's refusal
                (``QueueFull``, ``ServerError``: the jobs after it are still sent), or, when the
                connection failed or ``timeout`` ran out, ``ConnectionLost`` /
                ``OperationTimeout`` for the jobs sent and unanswered (they may be queued) and
                ``NotSent`` for the others.
            ConnectFailed: no server could be reached (nothing sent).
        """
        if window < 1:
            raise LocalProtocolError("window must be >= 1")
        packets = [_bulk_packet(i, job, self._serializer, priority, True)
                   for i, job in enumerate(jobs)]
        limit = self._limit(timeout)
        server, transport, session = self._pool.pick_server(None)
        pendings = transport.pipeline(session.request, packets, window, limit)
        results: list[object] = []
        for pending in pendings:
            if pending.error is not None:
                results.append(pending.error)
                continue
            handle: bytes = pending.result().handle
            self._remember(handle, server)
            results.append(handle)
        BulkSubmitError.check(results)
        return results  # type: ignore[return-value]

    def submit_many(
        self, jobs: Iterable[tuple[str | bytes, B]], *,
        priority: Priority = Priority.NORMAL, window: int = 100,
        timeout: float | EllipsisType | None = ...,
    ) -> list[B]:
        """Run many ``(function, data)`` foreground jobs with up to ``window`` in flight on one
        connection (multiplexed by handle); returns the results in order.

        ``timeout`` bounds each wait for the oldest job still running.

        Raises:
            LocalProtocolError: an invalid job (every job is checked before any is sent).
            BulkSubmitError: some jobs failed (a :class:`jobwire.errors.BulkError`):
                ``.results`` has, per job, its result or its exception: ``JobFailed``,
                ``JobException``, ``ServerError``, ``DeserializationError`` (a result the
                serializer cannot read); when the connection failed,
                ``ConnectionLost`` for the jobs sent (they may run) and ``NotSent`` for the
                others.
            OperationTimeout: a wait ran out (the jobs may still run).
            ConnectFailed: no server could be reached (nothing sent).
        """
        if window < 1:
            raise LocalProtocolError("window must be >= 1")
        packets = [_bulk_packet(i, job, self._serializer, priority, False)
                   for i, job in enumerate(jobs)]
        limit = self._limit(timeout)
        transport, session = self._pool.pick(None)
        results: list[JobTracker] = []
        oldest = 0
        lost: JobwireConnectionError | None = None
        try:
            for packet in packets:
                while len(results) - oldest >= window:
                    if not results[oldest].done:
                        transport.flush()
                        transport.wait_done(results[oldest], limit)
                    oldest += 1
                results.append(session.submit(packet))
            transport.flush()
            for result in results[oldest:]:
                if not result.done:
                    transport.wait_done(result, limit)
        except JobwireConnectionError as exc:  # the connection failed: the rest is not sent
            session.drop_trackers(results)
            lost = exc
        except BaseException:
            session.drop_trackers(results)
            raise
        outcome: list[object] = []
        for result in results:
            if not result.done:
                outcome.append(ConnectionLost(f"no answer: {lost}"))
            elif result.error is not None:
                outcome.append(result.error)
            else:
                try:
                    outcome.append(load(self._serializer, result.result(), None, "result"))
                except DeserializationError as exc:
                    outcome.append(exc)
        outcome += [NotSent(f"not sent: {lost}") for _ in packets[len(results):]]
        BulkSubmitError.check(outcome)
        return outcome  # type: ignore[return-value]

    @overload
    def submit_reduce(
        self, function: str | bytes, data: B | None, *, reducer: str | bytes,
        unique: str | bytes | None = None, background: Literal[False] = False,
        timeout: float | EllipsisType | None = ...,
    ) -> B: ...

    @overload
    def submit_reduce(
        self, function: str | bytes, data: B | None, *, reducer: str | bytes,
        unique: str | bytes | None = None, background: Literal[True],
        timeout: float | EllipsisType | None = ...,
    ) -> bytes: ...

    def submit_reduce(
        self, function: str | bytes, data: B | None, *, reducer: str | bytes,
        unique: str | bytes | None = None, background: bool = False,
        timeout: float | EllipsisType | None = ...,
    ) -> B | bytes:
        """Submit a map/reduce job (SUBMIT_REDUCE_JOB[_BACKGROUND]); returns the result
        (through the serializer), or the handle when ``background``.

        Raises:
            As :meth:`submit`.
        """
        uniq = b"" if unique is None else as_bytes(unique, "unique")
        cls = pk.SubmitReduceJobBackground if background else pk.SubmitReduceJob
        packet = cls(as_bytes(function, "function"), uniq, as_bytes(reducer, "reducer"), b"",
                     _data(self._serializer, data))
        limit = self._limit(timeout)
        if background:
            reply, server = self._call(packet, uniq or None, limit)
            self._remember(reply.handle, server)
            return reply.handle  # type: ignore[no-any-return]
        transport, session = self._pool.pick(uniq or None)
        job = session.submit(packet)
        transport.flush()
        try:
            raw = transport.wait(job, limit)
        except OperationTimeout:
            if job.handle is None:  # no JOB_CREATED: see _MAY_GO_UNANSWERED
                transport.close()
            raise
        finally:
            if not job.done and job.handle is not None:
                session.untrack(job.handle, job)
        return load(self._serializer, raw, job.handle, "result")

    def get_status(
        self, handle: bytes, *, timeout: float | EllipsisType | None = ...
    ) -> JobStatus:
        """GET_STATUS: the status of a job by handle.

        Asked of the server that created the handle when this client submitted it; otherwise
        of each reachable server in turn until one knows it (handles are per server).

        Raises:
            LocalProtocolError: an invalid handle. OperationTimeout, ConnectFailed.
        """
        packet = pk.GetStatus(handle)
        limit = self._limit(timeout)
        known = self._handles.get(handle)
        servers = [known] if known is not None else self._pool.order(None)
        reply: Any = None
        error: JobwireConnectionError | None = None
        for server in servers:
            try:
                reply, _ = self._call(packet, None, limit, server)
            except JobwireConnectionError as exc:
                error = exc
                continue
            if reply.known:
                break
        if reply is None:
            raise ConnectFailed(f"no Gearman server reachable: {error}")
        return JobStatus(reply.handle, None, reply.known, reply.running, reply.numerator,
                         reply.denominator)

    def get_status_unique(
        self, unique: str | bytes, *, timeout: float | EllipsisType | None = ...
    ) -> JobStatus:
        """GET_STATUS_UNIQUE: the status of the job with this unique id (asked of the server the
        unique routes to), with the number of clients waiting for it.

        Raises:
            LocalProtocolError: an invalid unique. OperationTimeout, ConnectFailed.
        """
        uniq = as_bytes(unique, "unique")
        reply, _ = self._call(pk.GetStatusUnique(uniq), uniq, self._limit(timeout))
        return JobStatus(None, reply.unique, reply.known, reply.running, reply.numerator,
                         reply.denominator, reply.client_count)

    def echo(
        self, data: str | bytes, *, timeout: float | EllipsisType | None = ...
    ) -> bytes:
        """ECHO_REQ: the server sends ``data`` back.

        Raises:
            OperationTimeout: no ECHO_RES within ``timeout`` seconds.
            ConnectFailed: no server could be reached.
            ConnectionLost: the connection closed before the answer.
        """
        reply, _ = self._call(pk.EchoReq(as_bytes(data, "data")), None,
                                       self._limit(timeout))
        return reply.data  # type: ignore[no-any-return]


class Admin:
    """The text admin protocol of one server, with typed results.

    Each method sends one admin line and waits for its answer. Every method may raise
    ``ServerError`` (the server answered ``ERR CODE text``; ``.code``, ``.text``),
    ``RemoteProtocolError`` (an answer that does not parse), ``OperationTimeout`` (no answer
    within ``timeout``), ``ConnectFailed`` / ``ConnectionLost``; and ``LocalProtocolError``,
    before anything is sent, for a name with whitespace or control characters.

    Args:
        address: the server, in any form of the collection's address rule (``"host:port"``,
            ``"host"``, ``("host", port)``, ``gearman://host[:port]``).
        port: the port, when ``address`` is a bare host.
        timeout: seconds an answer may take.
        connect_timeout: seconds to connect and finish the TLS handshake (default:
            ``timeout``, or 10 when that is ``None``: a connect is always bounded).
        max_list_lines: most lines accepted in one list answer (``workers``, ``status``,
            ``show jobs`` ...; default 1,000,000).
        max_list_size: most bytes accepted in one list answer (default 16 MiB). A list that
            goes past either before its final ``.`` raises ``RemoteProtocolError`` and closes
            the connection (later calls raise ``ConnectionLost``: open a new ``Admin``).
        ssl: TLS: ``True`` (the default context: certificate and host name checked) or an
            ``ssl.SSLContext``; ``None``/``False``: plain. A refused certificate raises
            ``jobwire.TLSError`` (a ``ConnectFailed``) on connect; there is never a plaintext
            fallback.
        server_hostname: the name the server's certificate must carry (default: the host).

    Raises:
        TypeError, InvalidAddress: ``address`` is not one server address, or ``ssl`` is not a
            bool or an ``ssl.SSLContext`` (TypeError).
    """

    def __init__(
        self, address: AddressLike = "127.0.0.1:4730", port: int | None = None, *,
        timeout: float | None = 10.0, connect_timeout: float | None = None,
        max_list_lines: int = adm.MAX_LIST_LINES, max_list_size: int = adm.MAX_LIST_SIZE,
        ssl: SSLOption = None, server_hostname: str | None = None,
    ) -> None:
        addresses = _addresses(address, port)
        if len(addresses) != 1:
            raise InvalidAddress(f"{address!r}: an admin connection talks to one server")
        #: The server.
        self.address: Address = addresses[0]
        self.timeout = timeout
        self.connect_timeout = connect_limit(connect_timeout, timeout)
        #: The TLS context of ``ssl=`` (``None``: plain TCP), and the name asked for.
        self.ssl_context = tls_context(ssl)
        self.server_hostname = server_hostname
        self._session = AdminSession(max_list_lines=max_list_lines, max_list_size=max_list_size)
        self._transport = Transport(
            addresses[0], self._session, connect_timeout=self.connect_timeout,
            ssl=self.ssl_context, server_hostname=server_hostname,
        )

    def __repr__(self) -> str:
        return describe(self, address_url(self.address, "gearman"),
                        "tls" if self.ssl_context is not None else "",
                        "closed" if self._transport.closed else "")

    def __enter__(self) -> Self:
        self._transport.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self._transport.close()

    def _run(self, command: adm.AdminCommand) -> adm.AdminReply:
        self._transport.connect()
        pending = self._session.request(command)
        self._transport.flush()
        reply = self._transport.wait(pending, self.timeout)
        if isinstance(reply, adm.AdminError):
            raise ServerError(reply.code, reply.message)
        return reply

    def _list(self, command: adm.AdminCommand) -> tuple[bytes, ...]:
        reply = self._run(command)
        if not isinstance(reply, adm.AdminList):
            raise RemoteProtocolError(f"expected a list, got {reply!r}")
        return reply.lines

    def _ok(self, command: adm.AdminCommand) -> str:
        reply = self._run(command)
        if not isinstance(reply, adm.AdminOk):
            raise RemoteProtocolError(f"expected OK, got {reply!r}")
        return reply.text

    def workers(self) -> list[adm.WorkerInfo]:
        """``workers``: every connection with its id and functions.

        Raises:
            ServerError: the server answered ``ERR``.
            RemoteProtocolError: the answer is not a ``workers`` list.
            OperationTimeout: no answer within the timeout.
            ConnectFailed: the server could not be reached.
        """
        return adm.parse_workers(self._list(adm.Workers()))

    def status(self) -> list[adm.FunctionStatus]:
        """``status``: queued/running/workers per function."""
        return adm.parse_status(self._list(adm.Status()))

    def priority_status(self) -> list[adm.PriorityStatus]:
        """``prioritystatus``: queued jobs per priority per function."""
        return adm.parse_priority_status(self._list(adm.PriorityStatusCommand()))

    def show_jobs(self) -> list[adm.JobInfo]:
        """``show jobs``."""
        return adm.parse_jobs(self._list(adm.ShowJobs()))

    def show_unique_jobs(self) -> list[bytes]:
        """``show unique jobs``: every job's unique id (empty ones included)."""
        return list(self._list(adm.ShowUniqueJobs()))

    def cancel_job(self, handle: str | bytes) -> None:
        """``cancel job H``: the clients waiting for the job get WORK_FAIL at once. The job stays
        in ``show jobs`` (ignored) until a worker would be given it, and a running job runs to
        its end. Raises ServerError (``UNKNOWN_JOB``) for an unknown job."""
        try:
            text = handle.decode("ascii") if isinstance(handle, bytes) else handle
        except UnicodeDecodeError:
            raise LocalProtocolError(f"handle is not ASCII: {handle!r}") from None
        self._ok(adm.CancelJob(text))

    def create_function(self, function: str) -> None:
        """``create function F``: the function exists (``status`` lists it) before any job or
        worker; ``maxqueue`` then applies to it."""
        self._ok(adm.CreateFunction(function))

    def drop_function(self, function: str) -> None:
        """``drop function F``. Raises ServerError (``code`` ``""``) if it is unknown (``function
        not found``) or has workers (``there are still connected workers or executing
        clients``); the bundled server also refuses while it has jobs."""
        self._ok(adm.DropFunction(function))

    def maxqueue(self, function: str, *sizes: int) -> None:
        """``maxqueue F [N | HIGH NORMAL LOW]`` (no size: the default, unlimited)."""
        self._ok(adm.MaxQueue(function, tuple(sizes)))

    def getpid(self) -> int:
        """``getpid``: the server's process id."""
        return parse_uint(self._ok(adm.GetPid()), "the pid getpid answered")

    def verbose(self) -> str:
        """``verbose``: the log level name."""
        return self._ok(adm.Verbose())

    def version(self) -> str:
        """``version``: the server's version string."""
        return self._ok(adm.Version())

    def shutdown(self, *, graceful: bool = False) -> None:
        """``shutdown [graceful]``. gearmand 1.1.20 lacks it: ServerError UNKNOWN_COMMAND."""
        self._ok(adm.Shutdown(graceful))
