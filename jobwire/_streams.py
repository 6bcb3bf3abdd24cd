"""The transport seam: a byte stream with read, write and close, sync and async.

This is the only module that touches sockets. Each protocol's clients move bytes between one of
these streams and their Sans-IO core; nothing here knows any protocol. Socket and backend
exceptions are mapped to jobwire's own, so every client raises the same errors whichever backend
runs it.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import struct
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ._url import Address, TCPAddress
from .errors import ConnectFailed, ConnectionLost, OperationTimeout, TLSError

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "AsyncStream",
    "AsyncTLSStream",
    "SSLOption",
    "SyncStream",
    "SyncTLSStream",
    "tls_context",
]

#: What a client's ``ssl=`` takes: ``None``/``False`` (plain TCP), ``True`` (the system's
#: default context: certificates and host name checked) or an ``ssl.SSLContext`` of your own.
SSLOption = ssl.SSLContext | bool | None

#: Bytes asked of each recv: below malloc's mmap threshold (128 KiB), so a recv costs no mmap.
READ_SIZE = 1 << 16


def _tune(sock: socket.socket) -> None:
    """TCP_NODELAY (no Nagle stall on request/reply) and keepalive (notice dead peers)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


def _timeval(timeout: float | None) -> bytes:
    if timeout is None or timeout <= 0:
        # 0 means "no limit" to the kernel; a zero timeout is the smallest it can count instead.
        seconds, micros = (0, 0) if timeout is None else (0, 1)
    else:
        seconds = int(timeout)
        micros = max(int((timeout - seconds) * 1_000_000), 1 if seconds == 0 else 0)
    return struct.pack("@ll", seconds, micros)


def tls_context(option: SSLOption) -> ssl.SSLContext | None:
    """The context for a client's ``ssl=`` option (``True``: the default, verifying one).

    Raises:
        TypeError: ``option`` is not a bool, ``None`` or an ``ssl.SSLContext``.
    """
    if option is None or option is False:
        return None
    if option is True:
        return ssl.create_default_context()
    if isinstance(option, ssl.SSLContext):
        return option
    raise TypeError(f"ssl= takes True, False, None or an ssl.SSLContext, not {option!r:.60}")


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None (not on asyncio: trio), without importing asyncio."""
    aio = sys.modules.get("asyncio")  # not imported: not running on asyncio
    return aio._get_running_loop() if aio is not None else None


#: Words of the TLS alerts a server sends when it refuses a client's certificate (missing,
#: from an unknown CA, expired...): ``TLSV13_ALERT_CERTIFICATE_REQUIRED``, ``..._UNKNOWN_CA``.
_REFUSED_CERTIFICATE = ("CERTIFICATE", "UNKNOWN_CA", "ACCESS_DENIED")


class _TLS:
    """TLS as a Sans-IO layer (``ssl.SSLObject`` on two memory BIOs): ciphertext in and out,
    plaintext in and out. The same code serves the blocking and the async stream, and the
    sockets underneath stay exactly as without TLS."""

    __slots__ = ("incoming", "obj", "outgoing")

    def __init__(self, context: ssl.SSLContext, address: Address, server_hostname: str | None):
        if server_hostname is None and isinstance(address, TCPAddress):
            server_hostname = address.host
        if server_hostname is None and context.check_hostname:
            raise TLSError(
                f"{address}: TLS over a unix socket needs server_hostname= (or a context "
                "with check_hostname off)"
            )
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_hostname=server_hostname)

    def handshake(self) -> bool:
        """One step of the handshake: True when done, False when it needs bytes from the peer
        (send :meth:`data_to_send` first).

        Raises:
            TLSError: the peer's certificate or the handshake was refused.
        """
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            return False
        except ssl.SSLCertVerificationError as exc:
            raise TLSError(f"TLS certificate refused: {exc.verify_message or exc}") from exc
        except ssl.SSLError as exc:
            raise TLSError(f"TLS handshake failed: {exc}") from exc
        return True

    def data_to_send(self) -> bytes:
        return self.outgoing.read()

    def receive_ciphertext(self, data: bytes) -> None:
        if data:
            self.incoming.write(data)
        else:
            self.incoming.write_eof()

    def read(self) -> bytes | None:
        """Plaintext now available (``b""``: the peer ended the stream), or None: need more.

        Raises:
            TLSError: the server refused this client's certificate (an alert).
            ConnectionLost: the TLS stream is corrupt.
        """
        try:
            return self.obj.read(READ_SIZE)
        except ssl.SSLWantReadError:
            return None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return b""  # close_notify, or a peer that just closed its socket
        except ssl.SSLError as exc:
            if any(word in (exc.reason or "") for word in _REFUSED_CERTIFICATE):
                # TLS 1.3: a server refuses the client's certificate (or its lack of one)
                # after the client finished its side of the handshake, so it shows here.
                raise TLSError(f"the server refused this client's certificate: {exc}") from exc
            raise ConnectionLost(f"TLS stream failed: {exc}") from exc

    def encrypt(self, data: bytes | bytearray | memoryview) -> bytes:
        try:
            self.obj.write(data)
        except ssl.SSLError as exc:
            raise ConnectionLost(f"TLS stream failed: {exc}") from exc
        return self.outgoing.read()


class SyncStream:
    """A connected blocking socket with per-call timeouts.

    The socket stays in blocking mode and timeouts are the kernel's (``SO_RCVTIMEO`` /
    ``SO_SNDTIMEO``), set only when they change: Python's own socket timeouts cost a ``poll``
    before every ``recv`` and ``send``, a quarter of a request's time on loopback.
    """

    __slots__ = ("_rcv_timeout", "_snd_timeout", "_sock", "address", "poll")

    def __init__(self, sock: socket.socket, address: Address) -> None:
        sock.settimeout(None)
        self._sock = sock
        self._rcv_timeout: float | None = None
        self._snd_timeout: float | None = None
        self.address = address
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        #: ``poll(0)``: non-empty when bytes, the end of the stream or an error wait to be
        #: read (one ``poll`` call, the socket registered once rather than on every look).
        self.poll = poller.poll

    @classmethod
    def connect(
        cls,
        address: Address,
        timeout: float | None,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> SyncStream:
        """Open a TCP or unix connection, with TLS on it when ``ssl_context`` is given.

        Raises:
            ConnectFailed: refused, unreachable, unresolvable, or ``timeout`` ran out.
            TLSError: the TLS handshake or the server's certificate was refused, or the
                handshake did not finish within ``timeout`` (counted from the connect).
        """
        if ssl_context is not None:
            tls = _TLS(ssl_context, address, server_hostname)
            deadline = None if timeout is None else time.monotonic() + timeout
            stream = SyncTLSStream(cls._open(address, timeout), address, tls)
            try:
                stream.handshake(deadline)
            except OperationTimeout as exc:
                stream.close()
                raise TLSError(
                    f"{address}: no TLS handshake within {timeout:g} s (is TLS served there?)"
                ) from exc
            except ConnectionLost as exc:
                stream.close()
                raise TLSError(f"{address}: the TLS handshake failed: {exc}") from exc
            except BaseException:
                stream.close()
                raise
            return stream
        return cls(cls._open(address, timeout), address)

    @staticmethod
    def _open(address: Address, timeout: float | None) -> socket.socket:
        try:
            if isinstance(address, TCPAddress):
                sock = socket.create_connection((address.host, address.port), timeout=timeout)
            else:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(timeout)
                    sock.connect(address.path)
                except BaseException:
                    sock.close()
                    raise
            _tune(sock)
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {address}: {exc}") from exc
        return sock

    def receive(self, timeout: float | None) -> bytes:
        """Return the next bytes received; ``b""`` at end of stream.

        Raises:
            OperationTimeout: nothing arrived within ``timeout`` seconds.
            ConnectionLost: the socket failed.
        """
        while True:
            try:
                # No limit keeps whatever kernel timeout is set (and retries when it runs out):
                # a blocking reserve between two timed calls then costs no setsockopt.
                if timeout is not None and timeout != self._rcv_timeout:
                    self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(timeout))
                    self._rcv_timeout = timeout
                return self._sock.recv(READ_SIZE)
            except (TimeoutError, BlockingIOError) as exc:
                if timeout is None:
                    continue
                raise OperationTimeout(f"receive from {self.address}: timed out") from exc
            except OSError as exc:
                raise ConnectionLost(f"receive from {self.address}: {exc}") from exc

    def receive_nowait(self) -> bytes | None:
        """The bytes received already (``b""`` at end of stream), or None: nothing yet. Never
        waits.

        Raises:
            ConnectionLost: the socket failed.
        """
        try:
            if not self.poll(0):  # cheaper than a recv that fails with EAGAIN
                return None
            return self._sock.recv(READ_SIZE, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except (OSError, ValueError) as exc:
            raise ConnectionLost(f"receive from {self.address}: {exc}") from exc

    def send(self, data: bytes | bytearray | memoryview, timeout: float | None) -> None:
        """Write all of ``data``.

        Raises:
            OperationTimeout: the peer did not take the bytes within ``timeout`` seconds.
            ConnectionLost: the socket failed.
        """
        try:
            if timeout != self._snd_timeout:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(timeout))
                self._snd_timeout = timeout
            self._sock.sendall(data)
        except (TimeoutError, BlockingIOError) as exc:
            raise OperationTimeout(f"send to {self.address}: timed out") from exc
        except OSError as exc:
            raise ConnectionLost(f"send to {self.address}: {exc}") from exc

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self._sock.close()


class AsyncStream:
    """A connected non-blocking socket driven by anyio (asyncio or trio).

    It uses the socket directly with anyio's ``wait_readable``/``wait_writable`` rather than an
    anyio socket stream: a request/reply then costs one trip through the event loop (waiting
    for the reply) instead of three, and a send that the kernel takes at once never awaits.
    That is most of the async clients' time on loopback.
    """

    __slots__ = (
        "_aio", "_deadline", "_loop", "_poll", "_reader", "_sock", "_spurious", "_timer",
        "_timer_at", "address",
    )

    def __init__(self, sock: socket.socket, address: Address) -> None:
        sock.setblocking(False)
        self._sock = sock
        self.address = address
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        # poll(0): whether bytes (or the end of the stream, an error) wait to be read, without
        # the exception a recv that finds nothing raises.
        self._poll = poller.poll
        # The asyncio loop last seen running a wait here (asyncio's own lookup of the running
        # loop costs a getpid() system call on Python 3.11), or None: not on asyncio.
        self._aio: asyncio.AbstractEventLoop | None = None
        # On asyncio, one timer serves the deadlines of successive waits: armed for the first,
        # it is kept while later waits have later deadlines (the common case, a limit counted
        # from each call) and, when it fires early, armed again for the waiting one's.
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        # On asyncio the socket stays registered with the loop between waits (add_reader and
        # remove_reader are two epoll_ctl calls and selector bookkeeping on every wait through
        # anyio.wait_readable): the loop it is registered with, the future the reading task
        # waits on, and how often the loop said "readable" with no one waiting.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reader: asyncio.Future[bytes | None] | None = None
        self._spurious = 0

    @classmethod
    async def connect(
        cls,
        address: Address,
        timeout: float | None,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> AsyncStream:
        """Open a TCP or unix connection (each resolved address in turn for TCP), with TLS on
        it when ``ssl_context`` is given.

        Raises:
            ConnectFailed: refused, unreachable, unresolvable, or ``timeout`` ran out.
            TLSError: the TLS handshake or the server's certificate was refused, or the
                handshake did not finish within ``timeout`` (counted from the connect).
        """
        if ssl_context is not None:
            tls = _TLS(ssl_context, address, server_hostname)
            deadline = None if timeout is None else anyio.current_time() + timeout
            stream = AsyncTLSStream(await cls._open(address, timeout), address, tls)
            try:
                with anyio.fail_after(None if deadline is None else
                                      max(deadline - anyio.current_time(), 0)):
                    await stream.handshake()
            except TimeoutError as exc:
                await stream.aclose()
                raise TLSError(
                    f"{address}: no TLS handshake within {timeout:g} s (is TLS served there?)"
                ) from exc
            except ConnectionLost as exc:
                await stream.aclose()
                raise TLSError(f"{address}: the TLS handshake failed: {exc}") from exc
            except BaseException:
                await stream.aclose()
                raise
            return stream
        return cls(await cls._open(address, timeout), address)

    @staticmethod
    async def _open(address: Address, timeout: float | None) -> socket.socket:
        try:
            with anyio.fail_after(timeout):
                if isinstance(address, TCPAddress):
                    sock = await _connect_tcp(address.host, address.port)
                else:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    await _connect_socket(sock, address.path)
        except TimeoutError as exc:
            raise ConnectFailed(f"cannot connect to {address}: timed out") from exc
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {address}: {exc}") from exc
        try:
            _tune(sock)
        except OSError as exc:
            sock.close()
            raise ConnectFailed(f"cannot connect to {address}: {exc}") from exc
        return sock

    async def receive(self, tried: bool = False, deadline: float | None = None) -> bytes:
        """Return the next bytes received; ``b""`` at end of stream. ``tried``: the caller
        has just found nothing received (:meth:`receive_nowait`), so wait before reading.
        ``deadline`` (asyncio only: ``loop.time()``): raise TimeoutError when it passes.

        Raises:
            ConnectionLost: the socket broke or was closed.
            TimeoutError: ``deadline`` passed.
        """
        sock = self._sock
        while True:
            if not tried:
                try:
                    return sock.recv(READ_SIZE)
                except BlockingIOError:
                    pass
                except OSError as exc:
                    raise ConnectionLost(f"receive from {self.address}: {exc}") from exc
            tried = False
            loop = self.event_loop()
            try:
                if loop is None:
                    await anyio.wait_readable(sock)
                elif deadline is None:
                    if (data := await self._received(loop)) is not None:
                        return data
                else:
                    waiter = self._received(loop)
                    self._deadline = deadline
                    if self._timer is None or self._timer_at > deadline:
                        self._arm(loop, deadline)
                    try:
                        if (data := await waiter) is not None:
                            return data
                    finally:
                        self._deadline = None
            except TimeoutError:
                raise
            except (anyio.ClosedResourceError, OSError, ValueError) as exc:
                raise ConnectionLost(f"receive from {self.address}: closed") from exc

    def _received(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bytes | None]:
        """On asyncio: a future of the next bytes, read by the loop's reader callback as soon
        as the socket is readable (or None: read them yourself). The socket stays registered
        with the loop while it is busy: anyio's ``wait_readable`` adds and removes the reader,
        two epoll_ctl calls and the selector's bookkeeping, on every wait."""
        if loop is not self._loop:
            old, self._loop = self._loop, None
            if old is not None and not old.is_closed():
                old.remove_reader(self._sock)
            loop.add_reader(self._sock, self._wake_reader)
            self._loop = loop
        self._spurious = 0
        self._reader = waiter = loop.create_future()
        return waiter

    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The asyncio loop running the caller, or None (trio), looked up once per loop."""
        loop = self._aio
        if loop is None or loop.is_closed():
            loop = self._aio = asyncio_loop()
        return loop

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(deadline, self._on_timer)
        self._timer_at = deadline

    def _on_timer(self) -> None:
        """The deadline timer fired: expire the waiting read if its deadline is this one,
        else wait on for the later deadline it has."""
        armed, self._timer = self._timer_at, None
        deadline, waiter = self._deadline, self._reader
        if deadline is None or waiter is None or waiter.done():
            return
        if armed >= deadline:
            self._expire(waiter)
        elif (loop := self._aio) is not None:
            self._arm(loop, deadline)

    def _expire(self, waiter: asyncio.Future[bytes | None]) -> None:
        if not waiter.done():
            if waiter is self._reader:
                self._reader = None
            waiter.set_exception(TimeoutError())

    def _wake_reader(self) -> None:
        """The loop's reader callback: read for the waiting task and hand it the bytes (so the
        loop does not see the same bytes as readable again before the task runs). Readable
        with no one waiting (bytes nobody asked for yet): the second time in a row, stop
        watching until the next wait, so an idle socket with unread bytes costs the loop
        nothing."""
        waiter = self._reader
        if waiter is None or waiter.done():
            self._reader = None
            self._spurious += 1
            if self._spurious > 1 and self._loop is not None:
                self._loop.remove_reader(self._sock)
                self._loop = None
            return
        try:
            data = self._sock.recv(READ_SIZE)
        except BlockingIOError:
            return  # a wake-up without bytes: keep waiting
        except OSError as exc:
            self._reader = None
            waiter.set_exception(exc)
            return
        self._reader = None
        self._spurious = 0
        waiter.set_result(data)

    def _forget_reader(self) -> None:
        """Unregister from the loop and fail a waiting task (before the socket closes)."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._sock)
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        waiter, self._reader = self._reader, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(anyio.ClosedResourceError())

    def receive_nowait(self) -> bytes | None:
        """The bytes received already (``b""`` at end of stream), or None: nothing yet. Never
        waits.

        Raises:
            ConnectionLost: the socket broke or was closed.
        """
        try:
            if not self._poll(0):  # cheaper than a recv that fails with EAGAIN
                return None
            return self._sock.recv(READ_SIZE)
        except BlockingIOError:
            return None
        except (OSError, ValueError) as exc:
            raise ConnectionLost(f"receive from {self.address}: {exc}") from exc

    def send_nowait(self, data: bytes) -> int:
        """Write what the kernel takes now, without waiting; return how many bytes that was.

        Raises:
            ConnectionLost: the socket broke or was closed.
        """
        try:
            return self._sock.send(data)
        except BlockingIOError:
            return 0
        except (OSError, ValueError) as exc:
            raise ConnectionLost(f"send to {self.address}: {exc}") from exc

    async def send(self, data: bytes) -> None:
        """Write all of ``data``, waiting for the peer to take it.

        Raises:
            ConnectionLost: the socket broke or was closed.
        """
        view = memoryview(data)
        while view:
            view = view[self.send_nowait(view) :]  # type: ignore[arg-type]
            if view:
                try:
                    await anyio.wait_writable(self._sock)
                except (anyio.ClosedResourceError, OSError, ValueError) as exc:
                    raise ConnectionLost(f"send to {self.address}: closed") from exc

    @property
    def buffered(self) -> int:
        """Bytes accepted by :meth:`send_nowait` but not yet handed to the kernel (TLS only)."""
        return 0

    async def drain(self) -> None:
        """Wait until every byte :meth:`send_nowait` accepted is handed to the kernel."""

    async def aclose(self) -> None:
        """Close the socket (idempotent); a task waiting on it gets ``ConnectionLost``."""
        sock = self._sock
        if sock.fileno() >= 0:
            self._forget_reader()
            anyio.notify_closing(sock)
            sock.close()
        await anyio.lowlevel.checkpoint()


class SyncTLSStream(SyncStream):
    """:class:`SyncStream` with TLS (:class:`_TLS`) between the caller and the socket."""

    __slots__ = ("_tls",)

    def __init__(self, sock: socket.socket, address: Address, tls: _TLS) -> None:
        super().__init__(sock, address)
        self._tls = tls

    def handshake(self, deadline: float | None) -> None:
        """Run the TLS handshake, until ``deadline`` (``time.monotonic()``) at the latest.

        Raises:
            TLSError: the handshake was refused (the alert that says why is sent first).
            OperationTimeout: ``deadline`` passed.
            ConnectionLost: the socket failed.
        """
        tls = self._tls

        def left() -> float | None:
            return None if deadline is None else max(deadline - time.monotonic(), 0.0)

        while not self._step():
            if out := tls.data_to_send():
                SyncStream.send(self, out, left())
            data = SyncStream.receive(self, left())
            if not data:
                raise TLSError(f"{self.address} closed the connection during the TLS handshake")
            tls.receive_ciphertext(data)
        if out := tls.data_to_send():
            SyncStream.send(self, out, left())

    def _step(self) -> bool:
        return _handshake_step(self._sock, self._tls)

    def receive(self, timeout: float | None) -> bytes:
        tls = self._tls
        while (data := tls.read()) is None:
            tls.receive_ciphertext(SyncStream.receive(self, timeout))
            if out := tls.data_to_send():  # e.g. a key update answered
                SyncStream.send(self, out, timeout)
        return data

    def receive_nowait(self) -> bytes | None:
        return None  # TLS records (and the answers some need written) go through receive()

    def send(self, data: bytes | bytearray | memoryview, timeout: float | None) -> None:
        try:
            SyncStream.send(self, self._tls.encrypt(data), timeout)
        except ConnectionLost as exc:
            if (refusal := _alert_received(self._sock, self._tls)) is None:
                raise
            raise refusal from exc


class AsyncTLSStream(AsyncStream):
    """:class:`AsyncStream` with TLS (:class:`_TLS`) between the caller and the socket.

    :meth:`send_nowait` takes every byte (it encrypts them all) and keeps what the kernel does
    not take yet in :attr:`buffered`; the transport then awaits :meth:`drain`.
    """

    __slots__ = ("_out", "_tls")

    def __init__(self, sock: socket.socket, address: Address, tls: _TLS) -> None:
        super().__init__(sock, address)
        self._tls = tls
        self._out = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._out)

    async def handshake(self) -> None:
        """Run the TLS handshake (the caller bounds its time).

        Raises:
            TLSError: the handshake was refused (the alert that says why is sent first).
            ConnectionLost: the socket failed.
        """
        tls = self._tls
        while not self._step():
            await self._push(tls.data_to_send())
            data = await AsyncStream.receive(self)
            if not data:
                raise TLSError(f"{self.address} closed the connection during the TLS handshake")
            tls.receive_ciphertext(data)
        await self._push(tls.data_to_send())

    def _step(self) -> bool:
        return _handshake_step(self._sock, self._tls)

    async def _push(self, ciphertext: bytes) -> None:
        self._out += ciphertext
        await self.drain()

    async def receive(self, tried: bool = False, deadline: float | None = None) -> bytes:
        # ``tried`` does not apply: receive_nowait() reads nothing from the socket.
        tls = self._tls
        while (data := tls.read()) is None:
            tls.receive_ciphertext(await AsyncStream.receive(self, False, deadline))
            if out := tls.data_to_send():
                await self._push(out)
        return data

    def receive_nowait(self) -> bytes | None:
        return None  # TLS records (and the answers some need written) go through receive()

    def send_nowait(self, data: bytes) -> int:
        self._out += self._tls.encrypt(data)
        self._send_out()
        return len(data)

    def _send_out(self) -> None:
        try:
            sent = AsyncStream.send_nowait(self, bytes(self._out))
        except ConnectionLost as exc:
            if (refusal := _alert_received(self._sock, self._tls)) is None:
                raise
            raise refusal from exc
        del self._out[:sent]

    async def send(self, data: bytes) -> None:
        self.send_nowait(data)
        await self.drain()

    async def drain(self) -> None:
        while self._out:
            self._send_out()
            if self._out:
                try:
                    await anyio.wait_writable(self._sock)
                except (anyio.ClosedResourceError, OSError, ValueError) as exc:
                    raise ConnectionLost(f"send to {self.address}: closed") from exc


def _alert_received(sock: socket.socket, tls: _TLS) -> TLSError | None:
    """After a send failed on a TLS connection: the refusal the peer sent before it closed,
    when it is among the bytes received already (a server that refused this client's
    certificate after the handshake, TLS 1.3, then reset the connection on our request)."""
    try:
        while data := sock.recv(READ_SIZE, socket.MSG_DONTWAIT):
            tls.receive_ciphertext(data)
    except OSError:
        pass
    try:
        tls.read()
    except TLSError as exc:
        return exc
    except ConnectionLost:
        pass
    return None


def _handshake_step(sock: socket.socket, tls: _TLS) -> bool:
    """One step of a TLS handshake (True when it is done); a refusal sends its alert first.
    Both TLS streams' step, written once.

    Raises:
        TLSError: the handshake failed.
    """
    try:
        return tls.handshake()
    except TLSError:
        _send_alert(sock, tls)
        raise


def _send_alert(sock: socket.socket, tls: _TLS) -> None:
    """Send, without waiting, the alert a refused handshake left to send: the peer then learns
    why (a server that wants a client certificate says so) instead of seeing the socket close."""
    if alert := tls.data_to_send():
        try:
            sock.setblocking(False)  # a blocking socket too: an alert never waits
            sock.send(alert)
        except OSError:
            pass


async def _connect_tcp(host: str, port: int) -> socket.socket:
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, sockaddr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            await _connect_socket(sock, sockaddr)
        except OSError as exc:
            error = exc
            continue
        return sock
    raise error


async def _connect_socket(sock: socket.socket, target: str | tuple[Any, ...]) -> None:
    """Connect a fresh socket without blocking the event loop; close it on any failure."""
    try:
        sock.setblocking(False)
        try:
            sock.connect(target)
        except (BlockingIOError, InterruptedError):
            await anyio.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                raise OSError(error, os.strerror(error)) from None
    except BaseException:
        sock.close()
        raise
