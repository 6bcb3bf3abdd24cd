"""Transports: move bytes between a stream and a session, and wait for Pendings. Nothing else.

Every protocol's clients are built on these two classes, so the rules of *how* bytes move live
here once and the rules of *what* the bytes mean live in each protocol's Sans-IO core. A
session (:class:`~jobwire._session.SessionLike`) queues the bytes of requests and completes
:class:`~jobwire._pending.Pending` objects from the bytes it is fed.

:class:`AsyncTransport` (anyio: asyncio and trio) lets many tasks share one connection. A task
queues its request on the session (no await in between, so the order on the wire is the order
of the queue) and then calls :meth:`AsyncTransport.flush` and :meth:`AsyncTransport.wait`:

* Writing: whichever task finds no write in progress becomes the writer and sends everything
  queued, its own bytes and others', until the queue is empty. The send is shielded from
  cancellation: a half-written request would put the stream out of step for everyone.
* Reading: whichever waiting task finds no read in progress becomes the reader; it reads, feeds
  the session (which completes every Pending the bytes answer and wakes their tasks) and stops
  once its own Pending is done, handing the reader role to the longest-waiting task.
* A task that is cancelled, or whose limit runs out, abandons its Pending: the session drops the
  reply when it arrives, never giving it to another caller.

:class:`Transport` is the blocking twin for one thread at a time. A wait whose limit runs out
closes the connection there, since the late reply would otherwise be read by the next call.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.lowlevel

from ._pending import Pending
from ._session import SessionLike
from ._streams import AsyncStream, SSLOption, SyncStream, asyncio_loop, tls_context
from ._url import Address
from .errors import ConnectionLost, JobwireError, LocalProtocolError, NotSent, OperationTimeout

if TYPE_CHECKING:
    import asyncio

__all__ = ["CONNECT_TIMEOUT", "AsyncTransport", "Transport", "connect_limit"]

#: Seconds to connect and finish the TLS handshake when a client sets neither
#: ``connect_timeout`` nor ``timeout``: opening a connection is always bounded, even when
#: replies may take forever (a TLS client on a plaintext port would wait for ever otherwise).
CONNECT_TIMEOUT = 10.0


def connect_limit(connect_timeout: float | None, timeout: float | None) -> float:
    """A client's connect timeout: ``connect_timeout``, else ``timeout``, else
    :data:`CONNECT_TIMEOUT`."""
    for value in (connect_timeout, timeout):
        if value is not None:
            return value
    return CONNECT_TIMEOUT

R = TypeVar("R")
T = TypeVar("T")
_monotonic = time.monotonic
P = TypeVar("P", bound=Pending[Any])


class _Pipeline:
    """The bookkeeping of one pipelined bulk call, shared by both transports (no I/O).

    It keeps at most ``window`` requests and, with ``max_bytes``, at most that many bytes
    unanswered; when one more would not fit, :meth:`blocker` names the Pending to wait for.
    Room is made in batches (down to half the window, half the budget) so that writes stay few
    and large. A request larger than ``max_bytes`` goes alone, once nothing else is unanswered.
    """

    __slots__ = ("max_bytes", "oldest", "outstanding", "pendings", "sizes", "size", "window")

    def __init__(
        self, window: int, max_bytes: int | None, size: Callable[[Any], int] | None
    ) -> None:
        if window < 1:
            raise LocalProtocolError("window must be >= 1")
        if max_bytes is not None and (max_bytes < 1 or size is None):
            raise LocalProtocolError("max_bytes must be >= 1 and needs a size function")
        self.window = window
        self.max_bytes = max_bytes
        self.size = size
        self.pendings: list[Pending[Any]] = []
        self.sizes: list[int] = []
        self.oldest = 0  # every Pending before this index is done
        self.outstanding = 0  # bytes of the unanswered requests from ``oldest`` on

    def _retire(self) -> None:
        pendings, sizes = self.pendings, self.sizes
        while self.oldest < len(pendings) and pendings[self.oldest].done:
            self.outstanding -= sizes[self.oldest]
            self.oldest += 1

    def blocker(self, nbytes: int) -> Pending[Any] | None:
        """The Pending to wait for before a request of ``nbytes`` may be queued, or None."""
        budget = self.max_bytes
        if len(self.pendings) - self.oldest < self.window and (
            budget is None or self.outstanding + nbytes <= budget
        ):
            return None  # room even before counting what was answered: the common case
        self._retire()
        count = len(self.pendings) - self.oldest
        if count == 0:
            return None  # nothing unanswered: anything goes, even over the budget
        over_count = count >= self.window
        over_bytes = budget is not None and self.outstanding + nbytes > budget
        if not (over_count or over_bytes):
            return None
        keep_count = self.window // 2 if over_count else count
        keep_bytes = self.outstanding
        if over_bytes:
            assert budget is not None
            keep_bytes = max(min(budget - nbytes, budget // 2), 0)
        # The first Pending whose answer leaves at most keep_count / keep_bytes unanswered.
        left_count, left_bytes, index = count, self.outstanding, self.oldest
        while True:
            left_count -= 1
            left_bytes -= self.sizes[index]
            if left_count <= keep_count and left_bytes <= keep_bytes:
                break
            index += 1
        target = self.pendings[index]
        return self.pendings[self.oldest] if target.done else target

    def add(self, pending: Pending[Any], nbytes: int) -> None:
        self.pendings.append(pending)
        self.sizes.append(nbytes)
        self.outstanding += nbytes

    def result(
        self, rest: Iterable[Any], stop: JobwireError | None, timed_out: Pending[Any] | None
    ) -> list[Pending[Any]]:
        """One done Pending per item: those sent, then ``NotSent`` for the ``rest``."""
        out = self.pendings
        if isinstance(stop, OperationTimeout):
            for i, pending in enumerate(out):
                if pending is timed_out or not pending.done:
                    pending.abandoned = True  # its reply, if it comes, is dropped
                    out[i] = _failed(pending.name, stop)
        for _ in rest:
            out.append(_failed("not sent", NotSent(f"not sent: the bulk call stopped: {stop}")))
        return out


def _failed(name: str, error: JobwireError) -> Pending[Any]:
    pending: Pending[Any] = Pending(name)
    pending.reject(error)
    return pending


def _read_early(session: SessionLike, stream: AsyncStream | SyncStream) -> bool:
    """Before the first send since the session was idle: hand what arrived meanwhile to the
    session as bytes that answer none of the requests now queued (``receive_early``: a reply
    there is a ``RemoteProtocolError``). True when the session failed. (With TLS nothing is
    read here: the next read gets the bytes.) Both transports' rule, written once."""
    try:
        data = stream.receive_nowait()
    except JobwireError as exc:
        session.fail(exc)
        return True
    if data is not None:
        session.receive_early(data)
    return session.broken is not None


class AsyncTransport:
    """One connection shared by many tasks.

    Args:
        address: where to connect.
        session: the protocol's session for this connection.
        connect_timeout: seconds to connect and finish the TLS handshake (``None``:
            :data:`CONNECT_TIMEOUT`).
        timeout: accepted for the blocking twin's sake (its send limit; one client source
            builds either transport) and unused: an async send is not timed.
        ssl: TLS on the connection: ``True`` (the default context: the server's certificate
            and host name are checked) or an ``ssl.SSLContext``; ``None``/``False``: plain.
        server_hostname: the name the certificate must carry (default: the address's host).
    """

    def __init__(
        self, address: Address, session: SessionLike, *, connect_timeout: float | None,
        timeout: float | EllipsisType | None = ..., ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        self.address = address
        self.session = session
        self.connect_timeout = connect_limit(connect_timeout, None)
        self.ssl_context = tls_context(ssl)
        self.server_hostname = server_hostname
        self._stream: AsyncStream | None = None
        self._connecting: anyio.Lock | None = None
        self._writing = False
        self._reading = False
        self._closed = False
        # Bytes taken from the session that the kernel did not take yet (flush sends them first).
        self._unsent = b""
        # Nothing was sent since the session was last seen idle: bytes received now answer
        # no request (_read_early reads them before the next send).
        self._quiet = True
        # Tasks waiting for a reply, longest-waiting first (to hand the reader role to).
        self._waiters: dict[Pending[Any], None] = {}
        # flush_nowait() sent bytes and no task has waited since: the next wait_done() does
        # not look for a reply first (it cannot be here yet).
        self._sent = False

    @property
    def connected(self) -> bool:
        """The stream is open."""
        return self._stream is not None

    @property
    def closed(self) -> bool:
        """Closed by the caller or broken: it will not connect again."""
        return self._closed or self.session.broken is not None

    async def connect(self) -> None:
        """Open the connection now (a no-op when open).

        Raises:
            ConnectFailed: the server cannot be reached.
            ConnectionLost: the transport was closed or broke: it never reconnects silently (the
                server would have forgotten this connection's state).
        """
        if self._stream is not None:
            return
        if self.closed:
            raise ConnectionLost(f"connection is closed: {self.session.broken or 'by caller'}")
        if self._connecting is None:
            self._connecting = anyio.Lock()
        async with self._connecting:
            if self._stream is None:
                self._stream = await AsyncStream.connect(
                    self.address, self.connect_timeout, self.ssl_context, self.server_hostname
                )

    # The seams where a client generated from one source (scripts/unasync.py) connects at a
    # different time on each transport: an async constructor cannot await, so the async client
    # connects on first use; the blocking one connects in its constructor (which then raises
    # ConnectFailed) and never on use (a closed one raises ConnectionLost at its next send).

    def connect_on_init(self) -> None:
        """What a client's constructor calls: nothing here (see :meth:`connect_on_use`)."""

    #: What a client calls before it uses the connection (``async with``, a call): :meth:`connect`.
    connect_on_use = connect

    @staticmethod
    def client_lock() -> anyio.Lock:
        """A lock for a client's steps that span its connections (opening a new one when the
        last one ended): tasks take turns. The blocking twin's does nothing."""
        return anyio.Lock()

    async def close_abandoned(self) -> None:
        """What a client calls when a caller gives up (cancelled, or its limit ran out) on a
        request the server may hold back, which would hold every request behind it: close the
        connection, shielded from the caller's cancellation. The blocking twin does nothing."""
        with anyio.CancelScope(shield=True):
            await self.aclose()

    async def aclose(self) -> None:
        """Close the connection; tasks still waiting get ``ConnectionLost``."""
        if self._closed:
            return
        self._closed = True
        self.session.fail(ConnectionLost("closed by caller"))
        await self._drop_stream()

    def flush_nowait(self) -> bool:
        """Hand what the session has queued to the kernel as far as it takes it now, without
        waiting: True when nothing is left to send (or the task sending now will send it);
        False when :meth:`flush` must be awaited for the rest. The common case, a request
        the kernel takes whole, then costs no coroutine.

        Raises:
            ConnectionLost: the send failed (the session is failed too).
        """
        if self._writing:
            return True  # the task writing now sends our bytes too before it stops
        stream = self._stream
        if stream is None or self._unsent or stream.buffered:
            return False  # flush() says why, or waits
        data = self.session.data_to_send()
        if not data:
            return True
        if self._quiet and self._read_early(stream):
            return False  # flush() drops the stream; the requests have the core's error
        try:
            sent = stream.send_nowait(data)
        except JobwireError as exc:
            self.session.fail(exc)
            raise
        if sent < len(data):
            self._unsent = data[sent:]
            return False
        self._sent = True
        return not stream.buffered

    async def flush(self) -> None:
        """Send everything the session has queued (or leave it to the task sending now).

        Raises:
            ConnectionLost: not connected, or the send failed (the session is failed too).
        """
        if self._writing:
            return  # the task writing now sends our bytes too before it stops
        stream = self._stream
        if stream is None:
            raise ConnectionLost(f"not connected: {self.session.broken or 'closed'}")
        self._writing = True
        try:
            while data := self._unsent or self.session.data_to_send():
                self._unsent = b""
                if self._quiet and self._read_early(stream):
                    break  # the requests have the core's error; nothing more is sent
                sent = stream.send_nowait(data)
                if sent < len(data):
                    with anyio.CancelScope(shield=True):
                        await stream.send(data[sent:])
            if stream.buffered and self.session.broken is None:
                # TLS: encrypted bytes the kernel did not take yet, flush_nowait's included
                with anyio.CancelScope(shield=True):
                    await stream.drain()
        except JobwireError as exc:
            self.session.fail(exc)
            raise
        finally:
            self._writing = False
        if self.session.broken is not None and self._stream is stream:
            await self._drop_stream()

    def _event_loop(self) -> asyncio.AbstractEventLoop | None:
        stream = self._stream
        return asyncio_loop() if stream is None else stream.event_loop()

    def _read_early(self, stream: AsyncStream) -> bool:
        """See :func:`_read_early`."""
        self._quiet = False
        return _read_early(self.session, stream)

    async def call(self, pending: Pending[R], limit: float | None) -> R:
        """Send what the session has queued and wait for ``pending``: the round trip of a
        request just submitted (:meth:`flush`, then :meth:`wait`).

        Raises:
            ConnectionLost: not connected, or the send failed (the session is failed too).
            OperationTimeout: ``limit`` ran out; the Pending is abandoned.
            JobwireError: whatever the request ended with (a reply error, ``ConnectionLost``).
        """
        if not self.flush_nowait():
            await self.flush()
        await self.wait_done(pending, limit)
        return pending.result()

    async def wait(self, pending: Pending[R], limit: float | None) -> R:
        """Wait for ``pending`` and return its reply (or raise its error).

        Args:
            limit: seconds to wait; ``None`` waits without limit.

        Raises:
            OperationTimeout: ``limit`` ran out; the Pending is abandoned.
            JobwireError: whatever the request ended with (a reply error, ``ConnectionLost``).
        """
        await self.wait_done(pending, limit)
        return pending.result()

    async def wait_done(self, pending: Pending[Any], limit: float | None) -> None:
        """Wait until ``pending`` is done, without raising its own error.

        Raises:
            OperationTimeout: ``limit`` ran out; the Pending is abandoned.
        """
        tried = False  # nothing was received a moment ago: the first read may wait at once
        if not pending.done and not self._reading:
            if self._sent:
                # The request went out just now (no await since): its reply cannot be here
                # yet, so wait for it without a read that would find nothing.
                tried = True
            else:
                got = self._read_nowait()
                if got:
                    await self._finish_read()
                tried = got is None
        self._sent = False
        if pending.done:  # answered already: no cancel scope, no trip through the event loop
            if self._waiters and not self._reading:
                # Our read may have answered the waiter the last reader handed its role to:
                # it will leave without reading, so pass the role on to one still waiting.
                self._hand_over_reading()
            return
        try:
            if limit is None or limit == math.inf:
                await self._wait_loop(pending, tried)  # no cancel scope: they cost every call
            elif (loop := self._event_loop()) is not None:
                # On asyncio the deadline is a timer on what this task waits for (a cancel
                # scope costs more than the rest of a request's wait); it raises TimeoutError.
                await self._wait_loop(pending, tried, loop, loop.time() + limit)
            else:
                # anyio.fail_after(limit), without its two generator layers
                scope = anyio.CancelScope(deadline=anyio.current_time() + limit)
                with scope:
                    await self._wait_loop(pending, tried)
                if scope.cancelled_caught and anyio.current_time() >= scope.deadline:
                    raise TimeoutError
        except TimeoutError:
            pending.abandoned = True
            raise OperationTimeout(
                f"{pending.name}: no reply within {limit:g} s from {self.address}"
            ) from None
        except BaseException:
            if not pending.done:
                pending.abandoned = True
            raise
        finally:
            pending.waker = None
            if self._waiters and not self._reading:
                self._hand_over_reading()  # as above: a task that leaves never reads

    async def _wait_loop(
        self,
        pending: Pending[Any],
        tried: bool,
        loop: asyncio.AbstractEventLoop | None = None,
        deadline: float = 0.0,
    ) -> None:
        """Read (as the reader) or wait to be woken until ``pending`` is done. With ``loop``
        (asyncio): raise TimeoutError once ``loop.time()`` reaches ``deadline``."""
        while not pending.done:
            if self._reading:
                woken = anyio.Event()
                pending.waker = woken.set
                self._waiters[pending] = None
                timer = loop.call_at(deadline, woken.set) if loop is not None else None
                try:
                    await woken.wait()
                    if loop is not None and not pending.done and loop.time() >= deadline:
                        raise TimeoutError
                except BaseException:
                    # Cancelled (or timed out) while waiting: the reader may have handed its
                    # role to this task between the cancellation and this task running (trio
                    # delivers both at once). A task that leaves never reads, so pass the role
                    # on, or the other waiters would wait for a reader that never comes.
                    self._waiters.pop(pending, None)
                    if not self._reading:
                        self._hand_over_reading()
                    raise
                finally:
                    self._waiters.pop(pending, None)
                    if timer is not None:
                        timer.cancel()
            else:
                await self._read_until(pending, tried, deadline if loop is not None else None)
            tried = False

    async def pipeline(
        self,
        submit: Callable[[T], P],
        items: Iterable[T],
        window: int,
        limit: float | None,
        *,
        max_bytes: int | None = None,
        size: Callable[[T], int] | None = None,
    ) -> list[P]:
        """Pipeline a bulk call: ``submit(item)`` queues each request and returns its Pending.

        At most ``window`` requests are unanswered at once and, with ``max_bytes``, at most that
        many bytes (``size(item)`` each): once half the window, or half the budget, has drained
        it queues more (fewer, larger writes), and a request larger than ``max_bytes`` goes
        alone when nothing else is unanswered. The docs say why: an unbounded burst is slower
        than a window (beanstalkd), and Workq 0.2.0 misreads a payload whose CR and LF straddle
        its 4096-byte read buffer (a byte budget of 4096 keeps them together).

        Returns:
            One done Pending per item, in order (a plain ``Pending`` in place of the session's
            for an item not sent or timed out). Once something was sent it raises nothing:
            when the connection fails, a wait runs out (``limit`` seconds for the oldest
            unanswered) or ``submit`` refuses an item, it stops sending and waits for what it
            sent; the request whose wait ran out and those behind it get that
            ``OperationTimeout``, a refused item its ``LocalProtocolError``, and the items not
            sent a :class:`~jobwire.errors.NotSent`.

        Raises:
            LocalProtocolError: ``window`` < 1, ``max_bytes`` < 1 or without ``size``, or the
                first item is refused (nothing sent).
            ConnectionLost: the connection is closed or broken before the first item is sent.
        """
        state = _Pipeline(window, max_bytes, size)
        rest = iter(items)
        stop: JobwireError | None = None
        waited: Pending[Any] | None = None
        session = self.session
        sized = max_bytes is not None and size is not None
        item: T | None = None
        holding = False  # ``item`` was taken from ``rest`` and not queued yet
        try:
            for item in rest:
                holding = True
                nbytes = size(item) if sized else 0  # type: ignore[misc]  # size is set
                while (waited := state.blocker(nbytes)) is not None:
                    await self.flush()
                    await self.wait_done(waited, limit)
                waited = None
                if session.broken is not None:
                    stop = ConnectionLost(f"connection failed: {session.broken}")
                    break
                holding = False
                try:
                    pending = submit(item)
                except JobwireError as exc:
                    if not state.pendings:
                        raise  # nothing sent: the caller's error, as for a single call
                    stop = exc
                    state.add(_failed("refused", exc), 0)
                    break
                state.add(pending, nbytes)
            await self.flush()
            for sent in state.pendings:
                waited = sent
                await self.wait_done(sent, limit)
            waited = None
        except OperationTimeout as exc:
            stop = exc
        except JobwireError as exc:  # a failed send: the session failed every request
            stop = exc
        unsent = itertools.chain((item,) if holding else (), rest)
        return cast("list[P]", state.result(unsent, stop, waited))

    async def serve(self) -> None:
        """Be the reader until cancelled: read, feed the session, let the tasks it woke run,
        flush what they and its callbacks queued; one read per pass of the event loop. Tasks
        meanwhile wait to be woken by their replies (workers use this).

        Raises:
            ConnectionLost: the connection failed or the server closed it.
        """
        await self.connect()
        stream = self._stream
        assert stream is not None
        if self._reading:
            raise RuntimeError("another task is already reading this connection")
        self._reading = True
        try:
            while True:
                if not self.flush_nowait():
                    await self.flush()
                self.session.receive_data(await stream.receive())
                if self.session.idle:
                    self._quiet = True
                if self.session.broken is not None:
                    await self._drop_stream()
                    raise ConnectionLost(str(self.session.broken))
                # One read per pass of the event loop: the tasks these replies woke run (and
                # queue what they send) before the next read and the flush before it. Reading
                # again at once would chase a server that writes each reply as it goes, a
                # reply per read, while the tasks that would send it more work wait.
                await anyio.lowlevel.checkpoint()
        except JobwireError as exc:
            self.session.fail(exc)
            await self._drop_stream()
            raise
        finally:
            self._hand_over_reading()

    def _read_nowait(self) -> bool | None:
        """Feed the session what the stream has received already, without waiting (no
        coroutine in the common case). True when :meth:`_finish_read` must follow: the
        connection broke, or what the session's callbacks queued was not all sent; None when
        nothing was received."""
        stream = self._stream
        if stream is None:
            return False
        try:
            data = stream.receive_nowait()
            if data is None:
                return None
            self.session.receive_data(data)
            if self.session.idle:
                self._quiet = True
            return self.session.broken is not None or not self.flush_nowait()
        except JobwireError as exc:
            self.session.fail(exc)
            return True

    async def _finish_read(self) -> None:
        """After :meth:`_read_nowait`: drop a broken stream, or send what is left."""
        if self.session.broken is None:
            try:
                await self.flush()
                return
            except JobwireError as exc:
                self.session.fail(exc)
        await self._drop_stream()

    async def _read_until(
        self, pending: Pending[Any], tried: bool = False, deadline: float | None = None
    ) -> None:
        stream = self._stream
        if stream is None:
            raise ConnectionLost(f"not connected: {self.session.broken or 'closed'}")
        self._reading = True
        try:
            while not pending.done:
                self.session.receive_data(await stream.receive(tried, deadline))
                tried = False
                if self.session.idle:
                    self._quiet = True
                if self.session.broken is not None:
                    await self._drop_stream()
                    break
                if not self.flush_nowait():
                    await self.flush()
        except JobwireError as exc:
            self.session.fail(exc)
            await self._drop_stream()
        finally:
            self._hand_over_reading()

    def _hand_over_reading(self) -> None:
        self._reading = False
        for waiter in self._waiters:
            if not waiter.done and waiter.waker is not None:
                waiter.waker()
                return

    async def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()


class Transport:
    """One blocking connection, for one thread at a time: :class:`AsyncTransport`'s twin, with
    the same names (``scripts/unasync.py`` turns ``AsyncTransport`` into ``Transport``).

    Args:
        address: where to connect.
        session: the protocol's session for this connection.
        connect_timeout: seconds to connect and finish the TLS handshake (``None``:
            :data:`CONNECT_TIMEOUT`).
        timeout: seconds a send may take (default: ``connect_timeout`` as given; ``None``: no
            limit).
        ssl, server_hostname: TLS, as for :class:`AsyncTransport`.
    """

    def __init__(
        self,
        address: Address,
        session: SessionLike,
        *,
        connect_timeout: float | None,
        timeout: float | EllipsisType | None = ...,
        ssl: SSLOption = None,
        server_hostname: str | None = None,
    ) -> None:
        self.address = address
        self.session = session
        self.connect_timeout = connect_limit(connect_timeout, None)
        self.timeout = connect_timeout if timeout is ... else timeout
        self.ssl_context = tls_context(ssl)
        self.server_hostname = server_hostname
        self._stream: SyncStream | None = None
        self._closed = False
        self._quiet = True  # as AsyncTransport's

    @property
    def connected(self) -> bool:
        """The socket is open."""
        return self._stream is not None

    @property
    def closed(self) -> bool:
        """Closed by the caller or broken: it will not connect again."""
        return self._closed or self.session.broken is not None

    def connect(self) -> None:
        """Open the connection now (a no-op when open).

        Raises:
            ConnectFailed: the server cannot be reached.
            ConnectionLost: the transport was closed or broke: it never reconnects silently.
        """
        if self._stream is not None:
            return
        if self.closed:
            raise ConnectionLost(f"connection is closed: {self.session.broken or 'by caller'}")
        self._stream = SyncStream.connect(
            self.address, self.connect_timeout, self.ssl_context, self.server_hostname
        )

    #: What a client's constructor calls: :meth:`connect` (the seam of
    #: :meth:`AsyncTransport.connect_on_init`).
    connect_on_init = connect

    def connect_on_use(self) -> None:
        """What a client calls before it uses the connection: nothing here (it opened in the
        constructor; a closed one raises ``ConnectionLost`` at the send)."""

    @staticmethod
    def client_lock() -> AbstractContextManager[None]:
        """:meth:`AsyncTransport.client_lock`'s twin: nothing to lock (one thread at a time)."""
        return nullcontext()

    def close_abandoned(self) -> None:
        """:meth:`AsyncTransport.close_abandoned`'s twin: nothing. A wait that runs out has
        closed the connection already; after an interrupt (Ctrl-C) it is left as it is."""

    def close(self) -> None:
        """Close the connection (idempotent); what was waiting gets ``ConnectionLost``."""
        self._closed = True
        self.session.fail(ConnectionLost("closed by caller"))
        self._drop_stream()

    def flush(self) -> None:
        """Send everything the session has queued.

        Raises:
            ConnectionLost: closed, or the send failed (the connection is then closed).
            OperationTimeout: the peer took nothing for ``timeout`` seconds (closed too).
        """
        data = self.session.data_to_send()
        if data:
            stream = self._stream
            if stream is None:
                stream = self._usable()  # raises
            if self._quiet:
                self._quiet = False
                # Nothing arrived while idle (the common case) costs one poll and no call.
                if stream.poll(0) and self._read_early(stream):
                    self._drop_stream()  # the requests have the core's error: nothing is sent
                    return
            try:
                stream.send(data, self.timeout)
            except JobwireError as exc:
                self._broke(exc)
                raise

    def wait(self, pending: Pending[R], limit: float | None) -> R:
        """Read until ``pending`` is done; return its reply (or raise its error).

        Raises:
            OperationTimeout: ``limit`` seconds passed; the connection is closed.
            JobwireError: whatever the request ended with.
        """
        self.wait_done(pending, limit)
        if pending.done and pending.error is None:  # Pending.result, inline
            return pending.reply  # type: ignore[return-value]  # done without an error
        return pending.result()  # raises

    def call(self, pending: Pending[R], limit: float | None) -> R:
        """Send what the session has queued and read until ``pending`` is done: the round trip
        of a request just submitted (:meth:`flush`, then :meth:`wait`).

        Raises:
            ConnectionLost: closed, or the send failed (the connection is then closed).
            OperationTimeout: the send or the reply took too long; the connection is closed.
            JobwireError: whatever the request ended with.
        """
        self.flush()
        return self.wait(pending, limit)

    def wait_done(self, pending: Pending[Any], limit: float | None) -> None:
        """Read until ``pending`` is done, without raising its own error.

        Raises:
            OperationTimeout: ``limit`` seconds passed; the connection is closed.
        """
        if pending.done:
            return
        deadline = None if limit is None else _monotonic() + limit
        timeout = limit
        session = self.session
        while True:
            stream = self._stream
            if stream is None:
                stream = self._usable()  # raises
            try:
                data = stream.receive(timeout)
            except JobwireError as exc:
                self._broke(exc)
                if pending.done and not isinstance(exc, OperationTimeout):
                    return
                raise
            session.receive_data(data)
            if session.idle:
                self._quiet = True
            if session.broken is not None:
                self._drop_stream()
                return
            if pending.done:
                return  # what callbacks queued goes out with the next request, or below
            # What the session's callbacks queued (a reserve sent again after DEADLINE_SOON)
            # goes out before the next read: whatever waits for it then gets its answer.
            self.flush()
            if deadline is not None:
                timeout = max(deadline - _monotonic(), 0.001)

    def pipeline(
        self,
        submit: Callable[[T], P],
        items: Iterable[T],
        window: int,
        limit: float | None,
        *,
        max_bytes: int | None = None,
        size: Callable[[T], int] | None = None,
    ) -> list[P]:
        """The blocking twin of :meth:`AsyncTransport.pipeline` (a wait that runs out closes
        the connection, so the requests behind it get ``ConnectionLost``).

        Raises:
            LocalProtocolError, ConnectionLost: as there.
        """
        state = _Pipeline(window, max_bytes, size)
        rest = iter(items)
        stop: JobwireError | None = None
        waited: Pending[Any] | None = None
        session = self.session
        sized = max_bytes is not None and size is not None
        item: T | None = None
        holding = False  # ``item`` was taken from ``rest`` and not queued yet
        try:
            for item in rest:
                holding = True
                nbytes = size(item) if sized else 0  # type: ignore[misc]  # size is set
                while (waited := state.blocker(nbytes)) is not None:
                    self.flush()
                    self.wait_done(waited, limit)
                waited = None
                if session.broken is not None:
                    stop = ConnectionLost(f"connection failed: {session.broken}")
                    break
                holding = False
                try:
                    pending = submit(item)
                except JobwireError as exc:
                    if not state.pendings:
                        raise
                    stop = exc
                    state.add(_failed("refused", exc), 0)
                    break
                state.add(pending, nbytes)
            self.flush()
            for sent in state.pendings:
                waited = sent
                self.wait_done(sent, limit)
            waited = None
        except OperationTimeout as exc:
            stop = exc
        except JobwireError as exc:
            stop = exc
        unsent = itertools.chain((item,) if holding else (), rest)
        return cast("list[P]", state.result(unsent, stop, waited))

    def _read_early(self, stream: SyncStream) -> bool:
        """See :func:`_read_early`."""
        self._quiet = False
        return _read_early(self.session, stream)

    def idle_and_open(self) -> bool:
        """Whether the connection is open with no request outstanding, found without waiting
        and without sending (a pool's check on checkout, ``jobwire._pool``): what arrived
        while it was idle is read now, as the next send would read it. The end of the stream
        (the server closed or died), a socket error, or bytes that answer no request (the
        session fails on them) all mean no, and the connection is then closed."""
        stream = self._stream
        if self.closed or stream is None or not self.session.idle:
            return False
        if self._read_early(stream):
            self._drop_stream()
            return False
        return True

    def _usable(self) -> SyncStream:
        stream = self._stream
        if stream is None:
            raise ConnectionLost(f"connection closed: {self.session.broken or 'by caller'}")
        return stream

    def _broke(self, exc: JobwireError) -> None:
        if isinstance(exc, OperationTimeout):
            # The reply may still come and would be read by the next call: start over instead.
            self.session.fail(ConnectionLost(f"closed after a timeout: {exc}"))
        else:
            self.session.fail(exc)
        self._drop_stream()

    def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
