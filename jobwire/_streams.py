"""The transport seam: a byte stream with read, write and close, sync and async.

This is the only module that touches sockets. Each protocol's clients move bytes between one of
these streams and their Sans-IO core; nothing here knows any protocol. Backend exceptions are
mapped to jobwire's own (:func:`map_sync_errors`, :func:`map_async_errors`) so every client
raises the same errors whichever backend runs it.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from ._url import Address, TCPAddress
from .errors import ConnectFailed, ConnectionLost, OperationTimeout

__all__ = ["AsyncStream", "SyncStream", "map_sync_errors"]

READ_SIZE = 1 << 18


def _tune(sock: socket.socket) -> None:
    """TCP_NODELAY (no Nagle stall on request/reply) and keepalive (notice dead peers)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


@contextlib.contextmanager
def map_sync_errors(what: str) -> Iterator[None]:
    """Turn socket-level exceptions into jobwire's errors."""
    try:
        yield
    except TimeoutError as exc:  # socket.timeout is TimeoutError since 3.10
        raise OperationTimeout(f"{what}: timed out") from exc
    except OSError as exc:
        raise ConnectionLost(f"{what}: {exc}") from exc


class SyncStream:
    """A connected blocking socket with per-call timeouts."""

    __slots__ = ("_sock", "_timeout", "address")

    def __init__(self, sock: socket.socket, address: Address) -> None:
        self._sock = sock
        self._timeout: float | None = sock.gettimeout()
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

    def _set_timeout(self, timeout: float | None) -> None:
        if timeout != self._timeout:
            self._sock.settimeout(timeout)
            self._timeout = timeout

    def receive(self, timeout: float | None) -> bytes:
        """Return the next bytes received; ``b""`` at end of stream.

        Raises:
            OperationTimeout: nothing arrived within ``timeout`` seconds.
            ConnectionLost: the socket failed.
        """
        self._set_timeout(timeout)
        with map_sync_errors(f"receive from {self.address}"):
            return self._sock.recv(READ_SIZE)

    def send(self, data: bytes | bytearray | memoryview, timeout: float | None) -> None:
        """Write all of ``data``.

        Raises:
            OperationTimeout: the peer did not take the bytes within ``timeout`` seconds.
            ConnectionLost: the socket failed.
        """
        self._set_timeout(timeout)
        with map_sync_errors(f"send to {self.address}"):
            self._sock.sendall(data)

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self._sock.close()


class AsyncStream:
    """A connected anyio byte stream (asyncio or trio)."""

    __slots__ = ("_stream", "address")

    def __init__(self, stream: anyio.abc.ByteStream, address: Address) -> None:
        self._stream = stream
        self.address = address

    @classmethod
    async def connect(cls, address: Address, timeout: float | None) -> AsyncStream:
        """Open a TCP or unix connection.

        Raises:
            ConnectFailed: refused, unreachable, unresolvable, or ``timeout`` ran out.
        """
        stream: anyio.abc.ByteStream
        try:
            with anyio.fail_after(timeout):
                if isinstance(address, TCPAddress):
                    stream = await anyio.connect_tcp(address.host, address.port)
                else:
                    stream = await anyio.connect_unix(address.path)
        except TimeoutError as exc:
            raise ConnectFailed(f"cannot connect to {address}: timed out") from exc
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {address}: {exc}") from exc
        with contextlib.suppress(anyio.TypedAttributeLookupError, OSError):
            _tune(stream.extra(SocketAttribute.raw_socket))
        return cls(stream, address)

    async def receive(self) -> bytes:
        """Return the next bytes received; ``b""`` at end of stream.

        Raises:
            ConnectionLost: the stream broke or was closed.
        """
        try:
            return await self._stream.receive(READ_SIZE)
        except anyio.EndOfStream:
            return b""
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ConnectionLost(f"receive from {self.address}: {exc!r}") from exc

    async def send(self, data: bytes) -> None:
        """Write all of ``data``.

        Raises:
            ConnectionLost: the stream broke or was closed.
        """
        try:
            await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ConnectionLost(f"send to {self.address}: {exc!r}") from exc

    async def aclose(self) -> None:
        """Close the stream (idempotent)."""
        with contextlib.suppress(Exception):
            await self._stream.aclose()
