"""TLS for the end-to-end tests: certificates from ``trustme`` on disk, and a byte relay that
adds or removes TLS in front of a real server, as stunnel does in production (beanstalkd and
Workq speak no TLS; Debian's gearmand is built without it: docs/gearman.md).

The relay is a real TLS endpoint (Python's ``ssl`` on an asyncio server in a thread) forwarding
the bytes unchanged to a real server: what the clients are tested against is the setup people
deploy, not a mock.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

trustme = pytest.importorskip("trustme", reason="trustme (a test dependency) is not installed")


@dataclass
class Certs:
    """A test CA and a server certificate for ``localhost`` (not 127.0.0.1: connecting to the IP
    tests the host name check), as PEM files."""

    ca: Any  # trustme.CA
    cert_file: str
    key_file: str
    ca_file: str
    client_file: str  # a client certificate from the test CA and its key, in one PEM file

    def client_context(self, *, cert: bool = False) -> ssl.SSLContext:
        """A client context that trusts the test CA (and checks host names); with ``cert``, it
        presents :attr:`client_file` (mutual TLS)."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        if cert:
            context.load_cert_chain(self.client_file)
        return context

    def foreign_client_context(self) -> ssl.SSLContext:
        """Trusts the test CA but presents a client certificate issued by another CA."""
        context = self.client_context()
        trustme.CA().issue_cert("stranger@example.org").configure_cert(context)
        return context

    @property
    def mtls_args(self) -> list[str]:
        """The bundled servers' flags to serve mutual TLS: only the test CA's clients."""
        return [*self.server_args, "--tls-client-ca", self.ca_file]

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    @property
    def server_args(self) -> list[str]:
        """The bundled servers' flags to serve TLS with this certificate."""
        return ["--tls-cert", self.cert_file, "--tls-key", self.key_file]


def make_certs(hostname: str = "localhost") -> Certs:
    ca = trustme.CA()
    cert = ca.issue_cert(hostname)
    folder = tempfile.mkdtemp(prefix="jobwire-tls-")
    cert_file, key_file, ca_file = (os.path.join(folder, n) for n in ("c.pem", "k.pem", "ca.pem"))
    cert.cert_chain_pems[0].write_to_path(cert_file)
    cert.private_key_pem.write_to_path(key_file)
    ca.cert_pem.write_to_path(ca_file)
    client_file = os.path.join(folder, "client.pem")
    ca.issue_cert("client@example.org").private_key_and_cert_chain_pem.write_to_path(client_file)
    return Certs(ca, cert_file, key_file, ca_file, client_file)


@contextlib.contextmanager
def silent_peer() -> Iterator[int]:
    """A port where the kernel accepts connections that nobody ever answers (a bare listening
    socket, never accepted from): a TLS client there waits for a ServerHello in vain."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]
    finally:
        sock.close()


def untrusted_context() -> ssl.SSLContext:
    """A verifying client context that trusts another CA than the servers' one."""
    context = ssl.create_default_context()
    trustme.CA().configure_trust(context)
    return context


class Relay:
    """Accept on a free loopback port and relay the bytes to ``target``: TLS on the accepting
    side with ``accept_tls`` (stunnel's server mode, in front of a plaintext server), TLS to the
    target with ``connect_tls`` (its client mode, for a plaintext program in front of a TLS
    server). A handshake that fails closes that connection."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        accept_tls: ssl.SSLContext | None = None,
        connect_tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        self.target = target
        self.accept_tls = accept_tls
        self.connect_tls = connect_tls
        self.server_hostname = server_hostname
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(lambda loop, context: None)  # failed handshakes
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._run, name="tls-relay", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the TLS relay did not start")

    def _run(self) -> None:
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        tls: dict[str, Any] = {} if self.accept_tls is None else {
            "ssl": self.accept_tls, "ssl_handshake_timeout": 10}
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0, **tls)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for writer in self._writers:
            writer.transport.abort()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(
                *self.target, ssl=self.connect_tls,
                server_hostname=self.server_hostname if self.connect_tls else None,
            )
        except (OSError, ssl.SSLError):
            writer.close()
            return
        self._writers.add(up_writer)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then end the other side too (both directions close)."""
    with contextlib.suppress(OSError, ssl.SSLError):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    writer.close()
