"""A bounded, thread-safe pool of blocking clients of one server, written once for the four
packages (each package's ``ClientPool`` supplies how to open a client and how to tell that
its connection ended, and the calls a producer makes).

Why: a blocking ``Client`` is for one thread at a time, and a web app (Django, Flask, gunicorn
threads) puts jobs from many. A pool of ``size`` clients lets any number of threads share at
most ``size`` connections.

The rules:

* **Bounded.** At most ``size`` clients exist at once (idle, in use, or being opened). A
  checkout when all are in use waits for one to come back, up to ``checkout_timeout`` seconds,
  then raises :class:`~jobwire.errors.PoolTimeout` (nothing was sent).
* **Lazy.** No connection is opened before the first checkout, so a pool made at import time
  (gunicorn ``--preload``) holds none when the workers fork.
* **Checked on checkout.** An idle client is handed out only if its connection is still open:
  what arrived while it was idle is read without waiting (``Transport.idle_and_open``: the
  end of the stream when the server restarted or died, or bytes that answer nothing). A client
  whose connection ended is closed and a new one opened in its place: the caller never sees
  the old connection's ``ConnectionLost``. (Over TLS nothing can be read without waiting, so a
  connection that died while idle is found by the call that uses it.)
* **Back-off.** When a new client cannot connect (``ConnectFailed``), the pool waits
  (:class:`jobwire._backoff.Backoff`: jittered, growing, one for the pool, reset by the next
  success) before any checkout tries again, and retries within the caller's
  ``checkout_timeout``; when that runs out the connect error is raised. A refused TLS
  certificate (``TLSError``) is raised at once.
* **A client that failed is not reused.** A ``with pool.client() as c:`` block that raised a
  connection error (``JobwireConnectionError``), an ``OperationTimeout`` or a
  ``RemoteProtocolError``, or was interrupted (``KeyboardInterrupt``...), gives its client back
  to be closed; so does any client whose connection the client itself knows to be closed.
* **Thread-safe.** One lock and one condition guard the bookkeeping; no I/O happens under the
  lock (connects, health checks and closes run outside it).
* **Fork-safe.** In a child process (``os.fork``: gunicorn, multiprocessing's fork start) every
  pool forgets the parent's clients: their sockets are the parent's too, so the child closes
  its copies (which sends nothing: the parent's connections stay up) and opens its own.
* **Closable.** :meth:`ClientPool.close` closes the idle clients at once and the ones in use
  when they come back; a checkout after it raises ``ConnectionLost``.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from typing_extensions import Self

from ._backoff import Backoff
from ._url import describe
from .errors import (
    ConnectFailed,
    ConnectionLost,
    JobwireConnectionError,
    OperationTimeout,
    PoolTimeout,
    RemoteProtocolError,
    TLSError,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_CHECKOUT_TIMEOUT",
    "DEFAULT_SIZE",
    "ClientPool",
    "PoolStats",
    "check_options",
]

#: Clients a pool holds at most, unless ``size=`` says otherwise.
DEFAULT_SIZE = 10
#: Seconds a checkout waits for a free client (or for the server to come back), by default.
DEFAULT_CHECKOUT_TIMEOUT = 10.0


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A snapshot of a pool (:attr:`ClientPool.stats`)."""

    #: The most clients the pool holds at once (``size=``).
    size: int
    #: Clients open and free.
    idle: int
    #: Clients checked out (or being opened or checked for one).
    in_use: int
    #: Threads waiting for a client.
    waiting: int
    #: Clients opened since the pool was made (in this process).
    opened: int
    #: Clients closed because their connection ended or their block raised a connection error.
    discarded: int
    #: Attempts to open a client that could not connect.
    connect_failures: int


def check_options(factory: Callable[..., object], *args: object, **options: object) -> None:
    """Check, without calling it, that ``factory(*args, **options)`` passes only parameters
    ``factory`` takes: a pool opens its clients later, and a misspelt option must fail where
    it was written, not at the first checkout.

    Raises:
        TypeError: an unknown keyword, or a parameter given twice.
    """
    try:
        inspect.signature(factory).bind(*args, **options)
    except TypeError as exc:
        raise TypeError(f"{getattr(factory, '__qualname__', factory)}: {exc}") from None


def _breaks(exc: BaseException) -> bool:
    """Whether a ``with pool.client()`` block that raised ``exc`` leaves its client unfit."""
    if isinstance(exc, PoolTimeout):  # a nested checkout ran out: this client is fine
        return False
    return isinstance(
        exc, (JobwireConnectionError, OperationTimeout, RemoteProtocolError)
    ) or not isinstance(exc, Exception)


class _Checkout(Generic[C]):
    """What :meth:`ClientPool.client` returns: a checkout as a ``with`` block."""

    __slots__ = ("_client", "_pool")

    def __init__(self, pool: ClientPool[C]) -> None:
        self._pool = pool

    def __enter__(self) -> C:
        self._client = client = self._pool._acquire()
        return client

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._pool._release(self._client, exc is not None and _breaks(exc))


class ClientPool(Generic[C]):
    """A bounded, thread-safe pool of blocking clients (see the module for the rules).

    A package's pool supplies :meth:`_connect` (a new client, connected) and :meth:`_alive`
    / :meth:`_broken` (whether a client's connection is usable); this class does the rest.

    Args:
        where: the server, as the ``repr`` shows it.
        size: the most clients open at once (>= 1).
        checkout_timeout: seconds a checkout may wait for a free client or for the server
            to accept a connection; ``None``: as long as it takes.
        backoff: the delays between failed connects (default: 0.05 s growing to 5 s).

    Raises:
        TypeError, ValueError: ``size`` is not an int >= 1, or ``checkout_timeout`` is not a
            number >= 0 or ``None``.
    """

    def __init__(
        self,
        where: str,
        *,
        size: int = DEFAULT_SIZE,
        checkout_timeout: float | None = DEFAULT_CHECKOUT_TIMEOUT,
        backoff: Backoff | None = None,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"size is an int, not {type(size).__name__}")
        if size < 1:
            raise ValueError(f"size must be >= 1: {size}")
        if checkout_timeout is not None:
            if isinstance(checkout_timeout, bool) or not isinstance(checkout_timeout,
                                                                    (int, float)):
                raise TypeError("checkout_timeout is a number of seconds or None, not "
                                f"{type(checkout_timeout).__name__}")
            if not checkout_timeout >= 0:  # NaN too
                raise ValueError(f"checkout_timeout must be >= 0: {checkout_timeout!r}")
        self._where = where
        #: The most clients open at once.
        self.size = size
        #: Seconds a checkout waits (``None``: no limit).
        self.checkout_timeout = checkout_timeout
        self._backoff = backoff if backoff is not None else Backoff(base=0.05, cap=5.0)
        self._closed = False
        self._reset()
        _POOLS.add(self)

    def _reset(self) -> None:
        """The state of a new pool: a new lock, no clients, no counts."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._idle: list[C] = []
        self._busy: dict[int, C] = {}  # checked out, by id
        self._reserved = 0  # slots taken by clients being opened
        self._waiting = 0
        self._opened = self._discarded = self._failures = 0
        self._retry_at = 0.0  # no connect before this (time.monotonic()): backing off
        self._failure: JobwireConnectionError | None = None  # why it is backing off
        self._backoff.reset()

    # -- what a package supplies ---------------------------------------------------------------

    def _connect(self) -> C:
        """A new client with its connection open.

        Raises:
            JobwireConnectionError: the server cannot be reached now (retried after a back-off;
                ``TLSError`` is not).
        """
        raise NotImplementedError

    def _alive(self, client: C) -> bool:
        """Whether an idle client may be handed out: its connection is open and did not end
        while it was idle (may read without waiting: see ``Transport.idle_and_open``)."""
        raise NotImplementedError

    def _broken(self, client: C) -> bool:
        """Whether a client coming back is known to be unusable (closed, or its connection
        failed): an attribute check, no I/O, under the pool's lock."""
        raise NotImplementedError

    # -- the public side -----------------------------------------------------------------------

    def client(self) -> AbstractContextManager[C]:
        """Check a client out for a ``with`` block: ``with pool.client() as c: c.put(...)``.

        The client is the pool's again when the block ends, or is closed if the block raised
        a connection error, an ``OperationTimeout`` or a ``RemoteProtocolError``, was
        interrupted, or left its connection closed. Its connection state (a beanstalk
        ``use``/``watch``, say) stays with it for the next borrower. Do not keep the client
        past the block, and do not check out a second one in the same thread while holding
        one from a full pool (it would wait for itself).

        Raises (on entering the block):
            PoolTimeout: every client stayed in use for ``checkout_timeout`` seconds.
            ConnectFailed: no client was free and none could connect within
                ``checkout_timeout`` (the last connect error, or a ``TLSError`` at once).
            ConnectionLost: the pool is closed.
        """
        return _Checkout(self)

    @property
    def stats(self) -> PoolStats:
        """How many clients are idle, in use and waited for, and the counts since the pool was
        made (a snapshot)."""
        with self._lock:
            return PoolStats(
                self.size, len(self._idle), len(self._busy) + self._reserved, self._waiting,
                self._opened, self._discarded, self._failures,
            )

    @property
    def closed(self) -> bool:
        """:meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close every idle client now and every client in use when it comes back (idempotent);
        later checkouts raise ``ConnectionLost``."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for client in idle:
            _close_quietly(client)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        stats = self.stats
        return describe(self, self._where, f"size={stats.size}", f"idle={stats.idle}",
                        f"in_use={stats.in_use}", "closed" if self._closed else "")

    # -- checkout and return -------------------------------------------------------------------

    def _acquire(self) -> C:
        timeout = self.checkout_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            client = self._take(deadline)
            if client is not None:
                if self._alive(client):
                    return client
                _close_quietly(client)  # its slot stays taken: open a new client in it
                with self._lock:
                    self._busy.pop(id(client), None)
                    self._reserved += 1
                    self._discarded += 1
            try:
                client = self._connect()
            except TLSError:
                self._give_back_slot()
                raise
            except JobwireConnectionError as exc:
                self._connect_failed(exc)
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                continue  # _take waits out the back-off (or takes a client that came back)
            except BaseException:
                self._give_back_slot()
                raise
            with self._lock:
                self._reserved -= 1
                self._busy[id(client)] = client
                self._opened += 1
                self._backoff.reset()
                self._retry_at, self._failure = 0.0, None
            return client

    def _take(self, deadline: float | None) -> C | None:
        """An idle client, checked out (:meth:`_acquire` checks its connection), or ``None``:
        a slot is taken for a new one. Waits while the pool is full or backing off."""
        cond = self._cond
        with cond:
            while True:
                if self._closed:
                    raise ConnectionLost(f"{self._where}: the pool is closed")
                if self._idle:
                    client = self._idle.pop()  # the most recently returned: the warmest
                    self._busy[id(client)] = client
                    return client
                now = time.monotonic()
                wake: float | None = None
                if len(self._busy) + self._reserved < self.size:
                    if now >= self._retry_at:
                        self._reserved += 1
                        return None
                    wake = self._retry_at  # backing off: until then, or until one comes back
                if deadline is not None:
                    if now >= deadline:
                        raise self._timed_out(wake is not None)
                    wake = deadline if wake is None else min(wake, deadline)
                self._waiting += 1
                try:
                    cond.wait(None if wake is None else wake - now)
                finally:
                    self._waiting -= 1

    def _timed_out(self, backing_off: bool) -> Exception:
        if backing_off and self._failure is not None:
            error: Exception = ConnectFailed(
                f"{self._where}: no connection within {self.checkout_timeout} s; the last "
                f"attempt: {self._failure}"
            )
            error.__cause__ = self._failure
            return error
        return PoolTimeout(f"{self._where}: all {self.size} clients stayed in use for "
                           f"{self.checkout_timeout} s")

    def _give_back_slot(self) -> None:
        with self._cond:
            self._reserved -= 1
            if self._waiting:
                self._cond.notify()

    def _connect_failed(self, exc: JobwireConnectionError) -> None:
        with self._cond:
            self._reserved -= 1
            self._failures += 1
            self._failure = exc
            self._retry_at = time.monotonic() + self._backoff.next_delay()
            self._cond.notify_all()  # waiters recompute: a slot is free after the back-off

    def _release(self, client: C, discard: bool) -> None:
        with self._cond:
            if self._busy.pop(id(client), None) is client:
                keep = not (discard or self._closed or self._broken(client))
                if keep:
                    self._idle.append(client)
                elif not self._closed:
                    self._discarded += 1
                if self._waiting:  # a client, or a slot for one, came free
                    self._cond.notify()
                if keep:
                    return
            elif any(c is client for c in self._idle):
                return  # given back twice: it is idle already
        # Discarded, or not this pool's any more (checked out before a fork, in the parent).
        _close_quietly(client)

    # -- fork ----------------------------------------------------------------------------------

    def _forget_parent(self) -> None:
        """In a child after ``fork``: drop every client (closing this process's copies of
        their sockets, which sends nothing) and start over with a new lock."""
        clients = [*self._idle, *self._busy.values()]
        self._reset()
        for client in clients:
            _close_quietly(client)


def _close_quietly(client: _Closable) -> None:
    # The clients' close() sends nothing and raises nothing on a dead socket; a pool closing
    # a client it gave up on must not replace the caller's own error with one from close().
    with contextlib.suppress(Exception):
        client.close()


#: Every pool of this process, for the fork handler.
_POOLS: weakref.WeakSet[ClientPool[Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pool in list(_POOLS):
        pool._forget_parent()


_register: Callable[..., None] | None = getattr(os, "register_at_fork", None)
if _register is not None:
    _register(after_in_child=_after_fork_in_child)
