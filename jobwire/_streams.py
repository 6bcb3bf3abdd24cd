"""The transport seam: a byte stream with read, write and close, sync and async.

This is the only module that touches sockets. Each protocol's clients move bytes between one of
these streams and their Sans-IO core; nothing here knows any protocol. Socket and backend
exceptions are mapped to jobwire's own, so every client raises the same errors whichever backend
runs it.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

import anyio
import anyio.lowlevel

from ._url import Address, TCPAddress
from .errors import ConnectFailed, ConnectionLost, OperationTimeout

__all__ = ["AsyncStream", "SyncStream"]

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


class SyncStream:
    """A connected blocking socket with per-call timeouts.

    The socket stays in blocking mode and timeouts are the kernel's (``SO_RCVTIMEO`` /
    ``SO_SNDTIMEO``), set only when they change: Python's own socket timeouts cost a ``poll``
    before every ``recv`` and ``send``, a quarter of a request's time on loopback.
    """

    __slots__ = ("_rcv_timeout", "_snd_timeout", "_sock", "address")

    def __init__(self, sock: socket.socket, address: Address) -> None:
        sock.settimeout(None)
        self._sock = sock
        self._rcv_timeout: float | None = None
        self._snd_timeout: float | None = None
        self.address = address

    @classmethod
    def connect(cls, address: Address, timeout: float | None) -> SyncStream:
        """Open a TCP or unix connection.

        Raises:
            ConnectFailed: refused, unreachable, unresolvable, or ``timeout`` ran out.
        """
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
        return cls(sock, address)

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

    __slots__ = ("_sock", "address")

    def __init__(self, sock: socket.socket, address: Address) -> None:
        sock.setblocking(False)
        self._sock = sock
        self.address = address

    @classmethod
    async def connect(cls, address: Address, timeout: float | None) -> AsyncStream:
        """Open a TCP or unix connection (each resolved address in turn for TCP).

        Raises:
            ConnectFailed: refused, unreachable, unresolvable, or ``timeout`` ran out.
        """
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
        return cls(sock, address)

    async def receive(self) -> bytes:
        """Return the next bytes received; ``b""`` at end of stream.

        Raises:
            ConnectionLost: the socket broke or was closed.
        """
        sock = self._sock
        while True:
            try:
                return sock.recv(READ_SIZE)
            except BlockingIOError:
                pass
            except OSError as exc:
                raise ConnectionLost(f"receive from {self.address}: {exc}") from exc
            try:
                await anyio.wait_readable(sock)
            except (anyio.ClosedResourceError, OSError, ValueError) as exc:
                raise ConnectionLost(f"receive from {self.address}: closed") from exc

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

    async def aclose(self) -> None:
        """Close the socket (idempotent); a task waiting on it gets ``ConnectionLost``."""
        sock = self._sock
        if sock.fileno() >= 0:
            anyio.notify_closing(sock)
            sock.close()
        await anyio.lowlevel.checkpoint()


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
