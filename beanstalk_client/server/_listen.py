"""Listening sockets for the bundled server, with the standard library only.

Why a module of its own, with no anyio and nothing of the protocol: ``python -m
beanstalk_client.server`` binds and listens *before* it imports anything else, as beanstalkd
does in its first milliseconds. A test suite that spawns the server and connects 0.1 s later
(greenstalk's does) then finds it listening; the kernel queues the connection until the event
loop accepts it a moment later. :func:`~beanstalk_client.server.serve` binds with the same
functions, so both ways listen alike.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat

__all__ = ["close_unix", "tcp_sockets", "unix_socket"]

#: The accept queue: connections the kernel completes before the server accepts them.
BACKLOG = 4096


def _bind_tcp(family: int, address: tuple[object, ...]) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def tcp_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on every address ``host`` resolves to (``localhost``: ::1 and
    127.0.0.1), all on one port; port 0 picks a free one.

    Raises:
        OSError: ``host`` does not resolve, or an address cannot be bound.
    """
    infos = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_ADDRCONFIG
    )
    addresses = sorted({(family, address) for family, _, _, _, address in infos})
    tries = 10  # port 0 on several addresses: the first one's port may be taken on the next
    while True:
        sockets: list[socket.socket] = []
        chosen = port
        try:
            for family, address in addresses:
                sockets.append(_bind_tcp(family, (address[0], chosen, *address[2:])))
                chosen = sockets[0].getsockname()[1]
        except OSError as exc:
            for sock in sockets:
                sock.close()
            tries -= 1
            if exc.errno != errno.EADDRINUSE or port != 0 or not sockets or not tries:
                raise
            continue
        return sockets


def unix_socket(path: str) -> socket.socket:
    """A listening unix socket at ``path``, replacing a stale socket file left there.

    Raises:
        OSError: ``path`` exists and is not a socket, or cannot be bound.
    """
    _remove_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.bind(path)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def close_unix(sock: socket.socket, path: str) -> None:
    """Close a listening unix socket and remove its file."""
    sock.close()
    with contextlib.suppress(OSError):
        _remove_stale_socket(path)


def _remove_stale_socket(path: str) -> None:
    """Remove a unix socket file left by an earlier run; refuse to clobber anything else."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
    os.unlink(path)
