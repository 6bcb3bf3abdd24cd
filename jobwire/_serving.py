"""What the bundled servers share: one single-threaded serving loop on ``selectors``.

Each protocol's server keeps its decisions in a pure state module (no I/O, the clock passed in)
and its framing in its Sans-IO core; a small *session* class per protocol binds the two to one
connection. :class:`Loop` only moves bytes and time: it accepts on the listening sockets
(``jobwire._listen`` binds them), reads each connection's bytes into its session, runs the
session's commands, sends what they produced, and fires the state's timers. The same loop runs
in ``python -m <package>.server`` (in the main thread) and inside an application or a test
(``serve()``, ``run_server()``: in a thread of its own).

Why not asyncio or anyio: importing asyncio alone took about 50 ms of a server's start, paid
before it could answer its first command (issue 18); the loop needs none of it. It imports
neither ``ssl`` (unless a TLS context is given) nor ``logging`` (unless a message may be shown:
:class:`Log`).

What protects a server from its clients (the same in all three):

* **Back-pressure.** A connection's replies go to its output buffer; the loop sends them at
  the end of the connection's turn (one ``send`` for the replies of up to :data:`TURN`
  commands), or as soon as they pass :data:`OUTPUT_CAP`. While more than that waits unsent
  the connection's commands do not run and it is not read, until the kernel took enough: a
  client that sends and never reads stops being read (TCP pushes back on it), as with
  beanstalkd, instead of growing the server's memory without bound.
* **Limits** (:class:`~jobwire._listen.Limits`; all off by default, as in beanstalkd and
  gearmand): a connection limit (one over it is accepted and closed at once), an idle timeout
  and a per-command ("line") timeout.
* **A bounded share of the loop** (:class:`Turn`): a connection runs at most :data:`TURN`
  commands (a read counting one per :data:`TURN_READ_UNIT` bytes) or :data:`TURN_SECONDS` of
  work, whichever comes first, then waits on the "ready again" list, served after the next
  ``select`` round (with no wait while the list holds anyone). Without this one client flooding
  pipelined commands (and reading its replies) kept every other connection waiting until its
  input ran dry: seconds.
* **TLS** (:func:`~jobwire._listen.server_tls_context`): the handshake is driven by the loop
  under a deadline, so a plaintext or silent client costs a socket for a few seconds at most.
* **Isolation.** An exception in one connection's handling is logged and closes that
  connection only; a failing timer is logged and the others still fire.
"""

from __future__ import annotations

import _thread
import contextlib
import selectors
import socket
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from ._events import NEED_DATA
from ._listen import Limits

TYPE_CHECKING = False  # typing is not imported at run time: a server starts without it
if TYPE_CHECKING:  # types only: a Protocol class costs its import time
    import logging
    import ssl
    from types import ModuleType
    from typing import Any, Final, Protocol, TypeVar

    class Session(Protocol):
        """One connection as a protocol serves it (made by the loop's ``open_session`` once the
        connection is accepted and, with TLS, its handshake done)."""

        def received(self, data: bytes) -> None:
            """Bytes read (``b""``: the client closed its sending side)."""

        def run(self, turn: Turn) -> int:
            """Run the commands buffered, appending replies to the connection's ``out``; return
            :data:`READ`, :data:`AGAIN`, :data:`WAIT`, :data:`CLOSE` or :data:`ABORT`."""

        @property
        def partial(self) -> bool:
            """True while part of a command is buffered (the line timeout runs)."""

        def busy(self) -> bool:
            """True while the connection may stay silent without being idle (it holds work)."""

        def close(self) -> None:
            """Forget the connection (release what it held). Called at least once, maybe twice."""

    class WaitingConn(Protocol):
        """What :class:`InOrderSession` needs of a server state's per-connection record."""

        #: Set (with ``on_reply`` called) when the state answers a command that had to wait.
        reply: Any
        on_reply: Callable[[], None] | None

        def take_reply(self) -> Any: ...
else:
    from jobwire._typing import TypeVar


__all__ = [
    "ABORT", "AGAIN", "CLOSE", "OUTPUT_CAP", "READ", "TURN", "TURN_READ_UNIT", "TURN_SECONDS",
    "WAIT", "Connection", "InOrderSession", "Log", "Loop", "Turn", "running", "running_async",
]

#: How long to pause accepting after the system refused a connection (EMFILE, ENFILE ...).
RETRY_ACCEPT_AFTER = 0.1
#: Connections accepted at most per wake-up of a listening socket (the others wait their turn).
ACCEPT_BATCH = 64
#: Unsent output of one connection past which its commands stop running and it is not read
#: (the back-pressure point): a client that never reads costs the server about this much,
#: plus one reply and one read.
OUTPUT_CAP = 1 << 18
#: Commands a connection runs at most in one turn (0.3-3 ms of work on the benchmark machine,
#: loaded).
TURN = 64
#: Bytes read that count as one command towards :data:`TURN` (a large command arriving takes
#: its share too: one read of 64 KiB counts 16).
TURN_READ_UNIT = 4096
#: Seconds of work after which a connection's turn ends whatever its count: commands differ
#: in cost (a Gearman submit costs several beanstalk puts), and the others' wait is time.
TURN_SECONDS = 0.0002
#: The longest a TLS handshake may take (shorter with a smaller idle or line timeout).
TLS_HANDSHAKE_TIMEOUT = 10.0
#: Bytes read at most at once from a connection.
READ_SIZE = 1 << 16
#: Bytes a closing connection reads and drops at most (see :meth:`Connection._drop_unread`).
DROP_CAP = 1 << 20
#: Seconds the loop waits at most in one ``select``: a timer may be years away (a beanstalk
#: put delayed 2**32-1 s), past what the system's wait accepts; the loop then wakes once a
#: day for nothing.
MAX_WAIT = 86400.0

#: What :meth:`Session.run` returns: every complete command ran, read more.
READ: Final = 0
#: The turn ended, or the output passed :data:`OUTPUT_CAP`, with commands left to run.
AGAIN: Final = 1
#: A command waits for the state (a beanstalk reserve, a Workq lease): nothing after it runs
#: until the state answers it and wakes the connection (:meth:`Connection.wake`).
WAIT: Final = 2
#: End the connection once its output is sent.
CLOSE: Final = 3
#: End the connection now (what can be sent at once still is).
ABORT: Final = 4

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_INF = float("inf")
_monotonic = time.monotonic
T = TypeVar("T")


class Log:
    """A server's messages, to the standard ``logging`` logger ``name``, imported only when a
    message may be shown: while nothing imported ``logging``, nothing configured it either,
    so INFO and DEBUG messages would go nowhere and are dropped without importing it (about
    6 ms of a server's start); a WARNING or worse imports it, calls ``setup(logging)`` once if
    given, and is logged.
    """

    __slots__ = ("_logger", "name", "setup")

    def __init__(self, name: str, setup: Callable[[ModuleType], None] | None = None) -> None:
        self.name = name
        self.setup = setup
        self._logger: logging.Logger | None = None

    def _get(self, level: int) -> logging.Logger | None:
        logger = self._logger
        if logger is None:
            if "logging" not in sys.modules:
                if level < 30:  # logging.WARNING
                    return None
                import logging

                if self.setup is not None:
                    self.setup(logging)
            import logging

            logger = self._logger = logging.getLogger(self.name)
        return logger

    def debug(self, message: str, *args: object) -> None:
        logger = self._get(10)
        if logger is not None:
            logger.debug(message, *args)

    def info(self, message: str, *args: object) -> None:
        logger = self._get(20)
        if logger is not None:
            logger.info(message, *args)

    def warning(self, message: str, *args: object) -> None:
        logger = self._shown(message, args)
        if logger is not None:
            logger.warning(message, *args)

    def exception(self, message: str, *args: object) -> None:
        """An ERROR with the exception being handled."""
        logger = self._shown(message, args)
        if logger is not None:
            logger.error(message, *args, exc_info=True)

    def _shown(self, message: str, args: tuple[object, ...]) -> logging.Logger | None:
        """The logger for a WARNING or worse; ``None`` when ``logging`` could not be imported
        (out of file descriptors, the case a warning may be about): the message then goes to
        stderr as is."""
        try:
            return self._get(30)
        except (ImportError, OSError):
            sys.stderr.write(f"{message % args}\n")
            return None


class Turn:
    """One connection's bounded share of the loop: the loop begins a turn (:meth:`begin`)
    before it runs a connection's commands, and the session calls :meth:`ran` after each one
    and stops (returning :data:`AGAIN`) when that says the share is spent: :data:`TURN`
    commands, a read counting one per :data:`TURN_READ_UNIT` bytes, or :data:`TURN_SECONDS`.
    """

    __slots__ = ("ends", "left")

    def __init__(self) -> None:
        self.left = TURN
        self.ends = 0.0

    def begin(self, read: int = 0) -> None:
        """A new turn, after ``read`` bytes were read."""
        self.left = TURN - read // TURN_READ_UNIT
        self.ends = _monotonic() + TURN_SECONDS

    def ran(self) -> bool:
        """One command ran: True when the turn is spent."""
        self.left -= 1
        return self.left <= 0 or _monotonic() >= self.ends


def _peer_name(sock: socket.socket, peer: Any) -> tuple[str, str]:
    """(``host:port`` or ``unix``, the host alone or ``unix``)."""
    if isinstance(peer, tuple):
        host = str(peer[0])
        return (f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"), host
    return "unix", "unix"


class Connection:
    """One accepted connection in the loop: its socket, its unsent output, its session, and
    where it stands (reading, running, waiting, closing)."""

    __slots__ = (
        "accepted_at", "answered", "blocked_on", "closed", "closing", "dirty", "eof", "host",
        "loop", "mask", "more", "opened", "out", "partial_since", "peer", "read_at",
        "scheduled", "session", "sock", "stalled_since", "tls", "waited", "waiters", "waiting",
        "wants",
    )

    def __init__(self, loop: Loop, sock: socket.socket, peer: str, host: str) -> None:
        self.loop = loop
        self.sock = sock
        #: ``host:port`` (``unix`` for a unix socket), for the log.
        self.peer = peer
        #: The peer's host alone (``unix`` for a unix socket).
        self.host = host
        #: What waits to be sent. A session appends to it (Gearman's state writes into it).
        self.out = bytearray()
        self.session: Session | None = None
        self.opened = False
        self.tls = False
        self.mask = 0  # the events the selector watches for
        self.wants = 0  # TLS: the events the handshake, or a read, waits for
        self.eof = False  # the client closed its sending side
        self.closing = False  # end the connection once ``out`` is sent
        self.closed = False
        self.more = False  # commands are buffered that did not run yet (AGAIN)
        self.waiting = False  # a command waits for the state (WAIT)
        self.waited = 0  # bytes read while it waits
        self.scheduled = False  # on the loop's ready list
        self.dirty = False  # on the loop's list of connections with output to send
        #: The connection whose output must drain before this one runs on (Gearman's
        #: forwarded WORK_* packets), and the connections waiting for this one's.
        self.blocked_on: Connection | None = None
        self.waiters: list[Connection] = []
        now = _monotonic()
        self.accepted_at = now
        self.read_at = now
        self.partial_since: float | None = None
        self.stalled_since: float | None = None
        self.answered = False

    # -- what sessions call ----------------------------------------------------------------------

    def wake(self) -> None:
        """Run this connection's session again soon (a waiting command was answered, or what
        held it back is gone). Loop thread only."""
        if not self.scheduled and not self.closed:
            self.scheduled = True
            self.loop.ready.append(self)

    def wrote(self) -> None:
        """Bytes were appended to :attr:`out` from outside this connection's own run (another
        connection's command, a timer): send them soon."""
        if not self.dirty:
            self.dirty = True
            self.loop.dirty.append(self)

    def wait_for(self, other: Connection) -> bool:
        """Send ``other``'s output now; if more than :data:`OUTPUT_CAP` of it stays unsent, hold
        this connection (its commands stop, it is not read) until it drains, and return True."""
        other.flush()
        if other.closed or len(other.out) < OUTPUT_CAP:
            return False
        self.blocked_on = other
        other.waiters.append(self)
        return True

    def flush(self) -> None:
        """Send what the kernel takes now of :attr:`out`; what it does not is sent when the
        socket is writable."""
        if self.closed:
            return
        out = self.out
        if out:
            loop = self.loop
            try:
                sent = self.sock.send(out if not self.tls else out[:READ_SIZE])
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                if not isinstance(exc, loop.tls_retry):
                    self._broke(exc)
                    return
                sent = 0
            if loop.timed and (sent or self.stalled_since is None):
                self.stalled_since = _monotonic()
                loop.deadline(self.stalled_since + (loop.limits.idle_timeout or _INF))
            if sent:
                del out[:sent]
        if not out:
            self.stalled_since = None
            if self.closing:
                self._finish()
                return
        if len(out) < OUTPUT_CAP:
            if self.more and self.blocked_on is None:
                self.wake()
            if self.waiters:
                waiters, self.waiters = self.waiters, []
                for waiter in waiters:
                    waiter.blocked_on = None
                    waiter.wake()
        self._watch()

    # -- the loop's side -------------------------------------------------------------------------

    def on_io(self, mask: int) -> None:
        """The selector says the socket is ready for ``mask``."""
        if self.closed:
            return
        if not self.opened:
            self._handshake()
            return
        if mask & _WRITE:
            self.flush()
            if self.closed:
                return
        if (mask & _READ or self.wants & mask) and self._reading():
            self.wants = 0
            self._read()

    def _open(self) -> None:
        self.opened = True
        loop = self.loop
        loop.log.info("open %s", self.peer)
        try:
            self.session = loop.open_session(self)
        except Exception:
            loop.log.exception("connection %s failed", self.peer)
            self.close()
            return
        self.read_at = _monotonic()
        if loop.timed and loop.limits.idle_timeout is not None:
            loop.deadline(self.read_at + loop.limits.idle_timeout)
        if self.tls and self.sock.pending():  # type: ignore[attr-defined]
            self._read()  # bytes that came with the handshake's last flight
        else:
            self._watch()

    def _handshake(self) -> None:
        loop = self.loop
        try:
            self.sock.do_handshake()  # type: ignore[attr-defined]
        except OSError as exc:
            if isinstance(exc, loop.tls_want_read):
                self.wants = _READ
            elif isinstance(exc, loop.tls_want_write):
                self.wants = _WRITE
            else:  # a plaintext client, a bad certificate, a reset...: one client's problem
                loop.log.info("connection %s: TLS handshake failed: %s", self.peer, exc)
                self.close()
                return
            self._watch()
            return
        self.wants = 0
        self._open()

    def _read(self) -> None:
        sock = self.sock
        try:
            data = sock.recv(READ_SIZE)
            if self.tls:
                while data and sock.pending():  # type: ignore[attr-defined]
                    data += sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            loop = self.loop
            if isinstance(exc, loop.tls_want_read):
                return
            if isinstance(exc, loop.tls_want_write):
                self.wants = _WRITE  # the TLS layer must write before it can read
                self._watch()
                return
            self._broke(exc)
            return
        if not data:
            self.eof = True
        elif self.waiting:
            self.waited += len(data)
        self.read_at = _monotonic()
        session = self.session
        assert session is not None
        try:
            session.received(data)
        except Exception:
            self._failed()
            return
        self.run(len(data))

    def run(self, read: int = 0) -> None:
        """Run the session's buffered commands for one turn, then send or wait as it says."""
        session = self.session
        if self.closed or session is None:
            return
        loop = self.loop
        turn = loop.turn
        turn.begin(read)
        try:
            status = session.run(turn)
        except Exception:
            self._failed()
            return
        if self.closed:
            return
        if turn.left < TURN - read // TURN_READ_UNIT:
            self.answered = True
        self.more = status == AGAIN
        if status == WAIT:
            if not self.waiting:
                self.waiting = True
                self.waited = 0
        else:
            self.waiting = False
        if status == READ:
            if self.eof:  # nothing more will come: the session had its last word
                self.closing = True
            elif loop.timed:
                self._timed_read()
        elif status == CLOSE:
            self.closing = True
        elif status == ABORT:
            self.flush()
            if not self.closed:
                self._drop_unread()
                self.close()
            return
        # AGAIN too: the turn's replies go now and the flush schedules the next turn, so a
        # pipelining client reads them while the others take their turns. (Watching the
        # socket for writing to send them cost two epoll_ctl calls a turn.)
        self.flush()

    def _timed_read(self) -> None:
        """After a run that took every complete command: the idle and line timeouts run anew
        (see :class:`~jobwire._listen.Limits`)."""
        loop = self.loop
        now = self.read_at = _monotonic()
        limits = loop.limits
        if limits.idle_timeout is not None:
            loop.deadline(now + limits.idle_timeout)
        session = self.session
        assert session is not None
        if not session.partial:
            self.partial_since = None
        elif self.answered or self.partial_since is None:
            self.partial_since = now  # what is buffered is a new command
            if limits.line_timeout is not None:
                loop.deadline(now + limits.line_timeout)
        self.answered = False

    def _watch(self) -> None:
        """Tell the selector what this connection waits for now."""
        if self.closed:
            return
        want = self.wants
        if self.opened:
            if self.out:
                want |= _WRITE
            if self._reading():
                want |= _READ
        if want != self.mask:
            selector = self.loop.selector
            if not self.mask:
                selector.register(self.sock, want, self.on_io)
            elif not want:
                selector.unregister(self.sock)
            else:
                selector.modify(self.sock, want, self.on_io)
            self.mask = want

    def _reading(self) -> bool:
        """Whether the connection is read now."""
        return not (
            self.eof or self.closing or self.more or self.blocked_on is not None
            or len(self.out) >= OUTPUT_CAP
            or (self.waiting and self.waited >= self.loop.wait_buffer_cap)
        )

    def _failed(self) -> None:
        self.loop.log.exception("connection %s failed", self.peer)
        self.close()

    def _broke(self, exc: OSError) -> None:
        self.loop.log.info("connection %s broke: %r", self.peer, exc)
        self.close()

    def _finish(self) -> None:
        """The output of a closing connection is sent: close it."""
        if not self.eof:
            self._drop_unread()
        self.close()

    def _drop_unread(self) -> None:
        """Read and drop what the client has already sent (up to :data:`DROP_CAP` bytes)
        before the server closes the connection: closing a socket with unread input makes the
        kernel reset the connection, and the client may then lose the replies sent just
        before."""
        dropped = 0
        while dropped < DROP_CAP:
            try:
                data = self.sock.recv(READ_SIZE)
            except OSError:
                return
            if not data:
                return
            dropped += len(data)

    def close(self, why: str | None = None) -> None:
        """Close the connection now: the session forgets it, the socket is closed."""
        if self.closed:
            return
        self.closed = True
        loop = self.loop
        if why is not None:
            loop.log.info("connection %s closed: %s", self.peer, why)
        loop.connections.discard(self)
        if self.mask:
            with contextlib.suppress(KeyError, ValueError, OSError):
                loop.selector.unregister(self.sock)
            self.mask = 0
        if self.session is not None:
            try:
                self.session.close()
            except Exception:
                loop.log.exception("connection %s: cleanup failed", self.peer)
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.blocked_on is not None:
            with contextlib.suppress(ValueError):
                self.blocked_on.waiters.remove(self)
            self.blocked_on = None
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            waiter.blocked_on = None
            waiter.wake()
        if self.opened:
            loop.log.info("close %s", self.peer)
        loop.closed_one()


class Flag:
    """A one-way ``threading.Event`` on a bare lock, set by the loop's thread only:
    ``threading`` (with ``weakref`` sets) costs a server process about 2 ms of its start, and
    the loop needs it only when it runs in a thread of its own (:func:`running`)."""

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._set = False
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        """Let every :meth:`wait` return, now and later; idempotent."""
        if not self._set:
            self._set = True
            self._lock.release()

    def is_set(self) -> bool:
        return self._set

    def wait(self) -> None:
        """Return once :meth:`set` was called (from any thread)."""
        with self._lock:
            pass


class _Call:
    """A function to run on the loop's thread, and its outcome."""

    __slots__ = ("done", "error", "function", "value")

    def __init__(self, function: Callable[[], Any]) -> None:
        self.function = function
        self.done = Flag()
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.function()
        except BaseException as exc:  # handed to the caller, in its thread
            self.error = exc
        finally:
            self.done.set()


class Loop:
    """The serving loop of one server: single-threaded, on ``selectors``.

    Args:
        listeners: listening sockets (``jobwire._listen``); their owner closes them after
            :meth:`run` returned.
        open_session: makes the :class:`Session` of a connection just accepted (after its
            TLS handshake).
        clock: the clock the state's deadlines use (``time.monotonic`` or ``time.time``).
        advance: fires every timer of the state due at the given time.
        next_deadline: the state's earliest pending deadline, or ``None``.
        log: where the loop reports connections and failures.
        limits: what a client is allowed (:class:`~jobwire._listen.Limits`).
        ssl_context: serve TLS with this server-side context.
        wait_buffer_cap: bytes read at most from a connection while one of its commands waits
            (to notice the client closing); then it is not read until the command is answered.
    """

    def __init__(
        self,
        listeners: Sequence[socket.socket],
        open_session: Callable[[Connection], Session],
        *,
        clock: Callable[[], float],
        advance: Callable[[float], object],
        next_deadline: Callable[[], float | None],
        log: Log,
        limits: Limits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        wait_buffer_cap: int = 1 << 20,
    ) -> None:
        self.open_session = open_session
        self.log = log
        self.limits = limits = limits or Limits()
        self.timed = limits.timed
        self.wait_buffer_cap = wait_buffer_cap
        self.ssl_context = ssl_context
        self.tls_want_read: type[OSError] | tuple[()] = ()
        self.tls_want_write: type[OSError] | tuple[()] = ()
        self.tls_retry: tuple[type[OSError], ...] = ()
        if ssl_context is not None:
            import ssl

            self.tls_want_read = ssl.SSLWantReadError
            self.tls_want_write = ssl.SSLWantWriteError
            self.tls_retry = (ssl.SSLWantReadError, ssl.SSLWantWriteError)
        timeouts = [t for t in (limits.idle_timeout, limits.line_timeout) if t]
        self.handshake_timeout = min([TLS_HANDSHAKE_TIMEOUT, *timeouts])
        self._clock = clock
        self._advance = advance
        self._next_deadline = next_deadline
        self.selector = selectors.DefaultSelector()
        self.listeners = list(listeners)
        for listener in self.listeners:
            listener.setblocking(False)
            self.selector.register(listener, _READ, self._acceptor(listener))
        self._paused: list[socket.socket] = []  # listeners resting after an accept error
        self._accept_again_at = _INF
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, _READ, self._woken)
        #: Every connection accepted and not closed (handshaking ones too).
        self.connections: set[Connection] = set()
        #: Connections to run again after the select round (their turn ended, or they were
        #: woken), and connections with output written from elsewhere, to send.
        self.ready: deque[Connection] = deque()
        self.dirty: list[Connection] = []
        self.turn = Turn()
        self._sweep_at = _INF  # when a connection's timeout may run out next
        self._calls: deque[_Call] = deque()
        self._lock = _thread.allocate_lock()
        self._thread: int | None = None
        self._finished = False
        self._stopping = False
        self._stop_when_empty = False
        #: Set once :meth:`run` returned (every connection closed).
        self.stopped = Flag()

    @property
    def wake_fd(self) -> int:
        """A file descriptor that wakes the loop when written to (``signal.set_wakeup_fd``)."""
        return self._wake_w.fileno()

    # -- from any thread -------------------------------------------------------------------------

    def wake(self) -> None:
        """Make the loop look at its calls and its stop flag now."""
        with contextlib.suppress(OSError):  # full: a wake-up is pending; closed: it stopped
            self._wake_w.send(b"\0")

    def stop(self) -> None:
        """Make :meth:`run` close every connection and return. Safe from any thread (and from
        a signal handler)."""
        self._stopping = True
        self.wake()

    def call(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the loop's thread and return what it returns (or raise what it
        raises), for code in another thread that reads or changes the server's state. Runs it
        at once when called on that thread, or when the loop does not run any more.
        """
        if _thread.get_ident() == self._thread:
            return function()
        call = _Call(function)
        with self._lock:
            if self._finished:
                return function()  # nothing else touches the state now
            self._calls.append(call)
        self.wake()
        call.done.wait()
        if call.error is not None:
            raise call.error
        value: T = call.value
        return value

    # -- on the loop's thread --------------------------------------------------------------------

    def deadline(self, when: float) -> None:
        """A connection's timeout may run out at ``when`` (``time.monotonic()``)."""
        if when < self._sweep_at:
            self._sweep_at = when

    def close_listeners(self) -> None:
        """Accept no more connections (the listening sockets are closed)."""
        for listener in self.listeners:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.unregister(listener)
            listener.close()
        self.listeners = []
        self._paused = []

    def stop_when_empty(self) -> None:
        """Stop once the last connection has closed."""
        self._stop_when_empty = True
        self.closed_one()

    def closed_one(self) -> None:
        if self._stop_when_empty and not self.connections:
            self.stop()

    def run(self, on_step: Callable[[], None] | None = None) -> None:
        """Serve until :meth:`stop`; then close every connection. ``on_step`` is called before
        each wait (a server process looks at the signals it received there)."""
        self._thread = _thread.get_ident()
        try:
            while not self._stopping:
                if on_step is not None:
                    on_step()
                    if self._stopping:
                        break
                self._step()
        finally:
            self._finish()

    def _step(self) -> None:
        clock = self._clock
        if self.ready or self._stopping:
            timeout: float | None = 0.0
        else:
            timeout = None
            due = self._next_deadline()
            if due is not None:
                timeout = max(0.0, due - clock())
            other = min(self._sweep_at, self._accept_again_at)
            if other != _INF:
                wait = max(0.0, other - _monotonic())
                timeout = wait if timeout is None else min(timeout, wait)
            if timeout is not None and timeout > MAX_WAIT:
                timeout = MAX_WAIT  # epoll takes 2**31-1 ms at most: it raised OverflowError
        for key, mask in self.selector.select(timeout):
            key.data(mask)
        due = self._next_deadline()
        if due is not None:
            now = clock()
            if due <= now:
                try:
                    self._advance(now)
                except Exception:  # the failed timer is gone; the others must still fire
                    self.log.exception("timer failed")
        if self._sweep_at != _INF or self._accept_again_at != _INF:
            now = _monotonic()
            if self._sweep_at <= now:
                self._sweep(now)
            if self._accept_again_at <= now:
                self._resume_accepting()
        ready = self.ready
        for _ in range(len(ready)):  # those ready now; the ones they wake go next round
            conn = ready.popleft()
            conn.scheduled = False
            if (conn.more or conn.waiting) and conn.blocked_on is None and (
                len(conn.out) < OUTPUT_CAP
            ):
                conn.run()
        dirty = self.dirty
        while dirty:
            conn = dirty.pop()
            conn.dirty = False
            if not conn.more or len(conn.out) >= OUTPUT_CAP:  # mid-chunk: sent with the rest
                conn.flush()

    def _woken(self, mask: int) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while self._calls:
            self._calls.popleft().run()

    def _acceptor(self, listener: socket.socket) -> Callable[[int], None]:
        return lambda mask: self._accept(listener)

    def _accept(self, listener: socket.socket) -> None:
        limit = self.limits.max_connections
        for _ in range(ACCEPT_BATCH):  # what the kernel has queued, in one wake-up
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return  # nothing more queued
            except ConnectionAbortedError:
                continue  # the client gave up meanwhile
            except OSError as exc:  # EMFILE, ENFILE...: back off, keep serving
                if listener.fileno() < 0:
                    return
                self.log.warning("accept failed: %s", exc)
                with contextlib.suppress(KeyError, ValueError):
                    self.selector.unregister(listener)
                self._paused.append(listener)
                self._accept_again_at = _monotonic() + RETRY_ACCEPT_AFTER
                return
            peer, host = _peer_name(listener, address)
            if limit is not None and len(self.connections) >= limit:
                self.log.info("connection %s refused: %d connections already", peer,
                              len(self.connections))
                sock.close()
                continue
            self._admit(sock, peer, host)

    def _admit(self, sock: socket.socket, peer: str, host: str) -> None:
        sock.setblocking(False)
        if sock.family != socket.AF_UNIX:  # replies are small and awaited
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            try:
                sock = self.ssl_context.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False
                )
            except OSError as exc:
                self.log.info("connection %s: TLS failed: %s", peer, exc)
                sock.close()
                return
        conn = Connection(self, sock, peer, host)
        self.connections.add(conn)
        if self.ssl_context is None:
            conn._open()
            return
        conn.tls = True
        self.deadline(conn.accepted_at + self.handshake_timeout)
        conn._handshake()

    def _resume_accepting(self) -> None:
        self._accept_again_at = _INF
        paused, self._paused = self._paused, []
        for listener in paused:
            if listener.fileno() >= 0:
                self.selector.register(listener, _READ, self._acceptor(listener))

    def _sweep(self, now: float) -> None:
        """Close the connections whose timeout ran out; note when the next one may."""
        self._sweep_at = _INF
        limits = self.limits
        idle, line = limits.idle_timeout, limits.line_timeout
        for conn in list(self.connections):
            if not conn.opened:
                if conn.accepted_at + self.handshake_timeout <= now:
                    self.log.info("connection %s: TLS handshake failed: no handshake within "
                                  "%s s", conn.peer, self.handshake_timeout)
                    conn.close()
                else:
                    self.deadline(conn.accepted_at + self.handshake_timeout)
                continue
            if conn.stalled_since is not None and idle is not None:
                if conn.stalled_since + idle <= now:
                    conn.close(f"replies not taken for {idle} s")
                else:
                    self.deadline(conn.stalled_since + idle)
                continue
            if conn.waiting or conn.closing or conn.more or conn.blocked_on is not None:
                continue  # a waiting command suspends both timeouts; the others are running
            if idle is not None:
                if conn.read_at + idle <= now:
                    session = conn.session
                    if session is None or not session.busy():
                        conn.close(f"idle for {idle} s")
                        continue
                    conn.read_at = now
                self.deadline(conn.read_at + idle)
            if line is not None and conn.partial_since is not None:
                if conn.partial_since + line <= now:
                    conn.close(f"a command took over {line} s to arrive")
                    continue
                self.deadline(conn.partial_since + line)

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
            calls = list(self._calls)
            self._calls.clear()
        for call in calls:
            call.run()
        for conn in list(self.connections):
            conn.close()
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
        self.stopped.set()


class InOrderSession:
    """A client of a protocol that answers a connection's commands strictly in order, where
    some commands wait for an event (a beanstalk ``reserve``, a Workq ``lease``).

    * **One send per turn.** Every complete command read is answered, and the replies of a
      turn go out together at its end (or once they passed :data:`OUTPUT_CAP`).
    * **A waiting command holds the line.** The replies before it are sent; then the socket is
      only read to notice the client closing (up to the loop's ``wait_buffer_cap`` bytes, then
      TCP pushes back) until the state answers it; what was read then runs after the answer.
    * **A vanished peer** (end of input) is reported to the state at once (``peer_closed``), so
      a waiting command is answered (TIMED_OUT, -TIMEOUT) rather than handed a job.

    Subclasses bind it to their core and state: ``proto``, :meth:`open`, :meth:`answer`,
    :meth:`peer_closed`, :meth:`close`, and optionally :meth:`busy`.
    """

    #: The protocol's server-role core: ``receive_data(bytes)``, ``next_event()``, and
    #: ``partial`` (True while part of a command is buffered).
    proto: Any

    def __init__(self, conn: Connection, clock: Callable[[], float]) -> None:
        self.conn = conn
        self.clock = clock
        self._eof = False
        self._waits = False
        #: The state's record of this connection.
        self.record = self.open(clock())
        self.record.on_reply = conn.wake

    # -- what a protocol supplies --------------------------------------------------------------

    def open(self, now: float) -> WaitingConn:
        """Register the connection with the state; return its record."""
        raise NotImplementedError

    def answer(self, event: object, now: float) -> Any:
        """The reply to ``event`` (a command or a framing error), ``None`` when it waits, or
        :data:`CLOSE` to end the connection."""
        raise NotImplementedError

    def peer_closed(self, now: float) -> None:
        """The client closed its sending side."""
        raise NotImplementedError

    def close(self) -> None:
        """Forget the connection (release what it held). Called at least once, maybe twice."""
        raise NotImplementedError

    def busy(self) -> bool:
        return False

    #: Optional: ``fast_path(out, turn)`` runs the commands at the front of the input that the
    #: protocol answers without making events (beanstalk's common put), appending their
    #: replies to ``out`` and calling ``turn.ran()`` after each; it returns True when the turn
    #: is spent or ``out`` reached :data:`OUTPUT_CAP`, False when the next command (if any)
    #: is one for ``next_event``. Its replies and effects must be exactly the general path's.
    fast_path: Callable[[bytearray, Turn], bool] | None = None

    # -- the session -----------------------------------------------------------------------------

    @property
    def partial(self) -> bool:
        return bool(self.proto.partial)

    def received(self, data: bytes) -> None:
        self.proto.receive_data(data)
        if not data:
            self._eof = True
            self.peer_closed(self.clock())  # a waiting command is answered now

    def run(self, turn: Turn) -> int:
        out = self.conn.out
        record = self.record
        clock = self.clock
        if self._waits:
            reply = record.take_reply()
            if reply is None:
                return WAIT
            self._waits = False
            out += reply.encode()
            if turn.ran():
                return AGAIN
        next_event, answer, fast_path = self.proto.next_event, self.answer, self.fast_path
        while True:
            if fast_path is not None and fast_path(out, turn):
                return AGAIN
            event = next_event()
            if event is NEED_DATA:
                return READ
            reply = answer(event, clock())
            if reply is None:
                if self._eof:  # already closed: the state answers the command now
                    self.peer_closed(clock())
                reply = record.take_reply()
                if reply is None:
                    self._waits = True
                    return WAIT
            elif reply is CLOSE:
                # Release the connection's jobs before its last replies are sent: a command
                # another client sends right after must see them gone.
                self.close()
                return CLOSE
            out += reply.encode()
            if len(out) >= OUTPUT_CAP or turn.ran():
                return AGAIN


def _start(loop: Loop, name: str) -> Any:
    import threading

    thread = threading.Thread(target=loop.run, name=name, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def running(loop: Loop, name: str) -> Iterator[None]:
    """Run ``loop`` in a thread of its own while the block runs; then stop it (every
    connection closed) and join the thread."""
    thread = _start(loop, name)
    try:
        yield
    finally:
        loop.stop()
        thread.join()


@contextlib.asynccontextmanager
async def running_async(loop: Loop, name: str) -> AsyncIterator[None]:
    """:func:`running` for async code (asyncio or trio): the join waits in a worker thread."""
    import anyio
    import anyio.to_thread

    thread = _start(loop, name)
    try:
        yield
    finally:
        loop.stop()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(thread.join)


def serve_process(loop: Loop, early: list[int], stops: Callable[[int], bool]) -> None:
    """Run ``loop`` in a server process's main thread until a signal stops it.

    ``early`` is where the process's signal handlers keep the signals they receive (also
    before the loop ran); the loop wakes on each (``signal.set_wakeup_fd``) and asks
    ``stops(signum)`` what it means: True stops the loop (every connection closed), False
    goes on (a server's SIGUSR1).
    """
    if TYPE_CHECKING:
        import signal
    else:  # signal's own functions, without the enums signal.py builds (0.5 ms a start)
        import _signal as signal

    def on_step() -> None:
        while early:
            if stops(early.pop(0)):
                loop.stop()

    signal.set_wakeup_fd(loop.wake_fd, warn_on_full_buffer=False)
    try:
        loop.run(on_step)
    finally:
        signal.set_wakeup_fd(-1)
