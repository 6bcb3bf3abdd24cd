"""TLS end to end: ``ssl=`` and ``server_hostname=`` on the beanstalk clients, sync, asyncio and
trio, against the bundled server serving TLS (``--tls-cert``) and against the real beanstalkd
behind a TLS-terminating relay (beanstalkd speaks no TLS: people put it behind stunnel), with
certificates made by ``trustme``. A certificate that is not trusted, or not for the host name
asked for, is a ``TLSError`` at connect: never a plaintext fallback."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import pytest

from beanstalk_client import AsyncClient, Client, Job, Worker
from jobwire import ConnectFailed, ConnectionLost, TLSError

from ..conftest import BeanstalkServer, start_server
from ..tlsrelay import Certs, Relay, make_certs, silent_peer, untrusted_context


@dataclass
class TLSBeanstalk:
    kind: str
    port: int  # where TLS is served, on 127.0.0.1 (certificate: "localhost")
    context: ssl.SSLContext  # trusts the test CA

    @property
    def address(self) -> tuple[str, int]:
        return ("localhost", self.port)


@pytest.fixture(scope="module")
def certs() -> Certs:
    return make_certs()


@pytest.fixture(
    scope="module", params=["bundled", pytest.param("beanstalkd", marks=pytest.mark.real_server)]
)
def tls_server(request: pytest.FixtureRequest, certs: Certs) -> Iterator[TLSBeanstalk]:
    """The bundled server with ``--tls-cert``, or beanstalkd behind a TLS relay (stunnel's
    setup)."""
    if request.param == "bundled":
        server = start_server("bundled", args=certs.server_args)
        yield TLSBeanstalk("bundled", server.port, certs.client_context())
        server.stop()
        return
    server = start_server("beanstalkd")
    relay = Relay((server.host, server.port), accept_tls=certs.server_context())
    yield TLSBeanstalk("beanstalkd", relay.port, certs.client_context())
    relay.close()
    server.stop()


def test_put_reserve_delete_over_tls(tls_server: TLSBeanstalk, tube: str) -> None:
    big = bytes(range(256)) * 2048  # 512 KiB: many TLS records each way
    with Client(tls_server.address, ssl=tls_server.context, timeout=10) as client:
        assert client.ssl_context is tls_server.context
        client.use(tube)
        client.watch(tube)
        first = client.put(b"hello")
        second = client.put(big)
        ids = client.put_many([b"%d" % i for i in range(300)], window=64)
        job = client.reserve(wait=5)
        assert (job.id, job.body) == (first, b"hello")
        client.delete(job)
        job = client.reserve(wait=5)
        assert (job.id, job.body) == (second, big)
        client.delete(job)
        client.delete_many(ids)
        assert client.stats_tube(tube)["current-jobs-ready"] == 0


@pytest.mark.anyio
async def test_async_put_reserve_delete_over_tls(tls_server: TLSBeanstalk, tube: str) -> None:
    async with AsyncClient(tls_server.address, ssl=tls_server.context, timeout=10) as client:
        await client.use(tube)
        await client.watch(tube)
        ids: list[int] = []

        async def put(i: int) -> None:
            ids.append(await client.put(b"job %d" % i + b"." * 20_000))

        async with anyio.create_task_group() as tg:  # many tasks share the one TLS stream
            for i in range(50):
                tg.start_soon(put, i)
        bodies = set()
        for _ in ids:
            job = await client.reserve(wait=5)
            bodies.add(job.body)
            await client.delete(job)
        assert bodies == {b"job %d" % i + b"." * 20_000 for i in range(50)}


@pytest.mark.anyio
async def test_async_put_of_a_body_the_kernel_does_not_take_at_once(
    tls_server: TLSBeanstalk, tube: str
) -> None:
    """One task's put whose ciphertext is more than the socket takes in one send: what the
    kernel did not take is sent before the reply is awaited (it was left buffered, and the
    put ran out of time)."""
    big = bytes(range(256)) * 3072  # 768 KiB
    async with AsyncClient(tls_server.address, ssl=tls_server.context, timeout=10) as client:
        await client.use(tube)
        await client.watch(tube)
        stream = client._transport._stream  # a test-only look inside: a small send buffer
        assert stream is not None
        stream._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        job_id = await client.put(big)
        job = await client.reserve(wait=5)
        assert (job.id, job.body) == (job_id, big)
        await client.delete(job)


def test_untrusted_certificate_is_a_tls_error(tls_server: TLSBeanstalk) -> None:
    with pytest.raises(TLSError, match="certificate"):
        Client(tls_server.address, ssl=untrusted_context(), timeout=5)


@pytest.mark.anyio
async def test_async_untrusted_certificate_is_a_tls_error(tls_server: TLSBeanstalk) -> None:
    client = AsyncClient(tls_server.address, ssl=untrusted_context(), timeout=5)
    with pytest.raises(TLSError, match="certificate"):
        await client.connect()
    await client.aclose()


def test_ssl_true_is_the_default_verifying_context(tls_server: TLSBeanstalk) -> None:
    # The system's CAs do not know the test CA: refused, not a plaintext fallback.
    with pytest.raises(TLSError, match="certificate"):
        Client(tls_server.address, ssl=True, timeout=5)
    context = AsyncClient(tls_server.address, ssl=True).ssl_context
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_host_name_is_checked_and_server_hostname_overrides(tls_server: TLSBeanstalk) -> None:
    with pytest.raises(TLSError, match="certificate"):  # the certificate is for "localhost"
        Client(("127.0.0.1", tls_server.port), ssl=tls_server.context, timeout=5)
    with Client(("127.0.0.1", tls_server.port), ssl=tls_server.context,
                server_hostname="localhost", timeout=5) as client:
        assert client.list_tube_used() == "default"


@pytest.mark.anyio
async def test_async_host_name_is_checked(tls_server: TLSBeanstalk) -> None:
    client = AsyncClient(("127.0.0.1", tls_server.port), ssl=tls_server.context, timeout=5)
    with pytest.raises(TLSError, match="certificate"):
        await client.connect()
    async with AsyncClient(("127.0.0.1", tls_server.port), ssl=tls_server.context,
                           server_hostname="localhost", timeout=5) as client:
        assert await client.list_tube_used() == "default"


def test_plaintext_client_to_a_tls_port_fails_cleanly(tls_server: TLSBeanstalk) -> None:
    # The server refuses the handshake and closes: an error at once, never a hang.
    with Client(tls_server.address, timeout=5) as client, pytest.raises(ConnectionLost):
        client.list_tube_used()


@pytest.mark.slow
def test_tls_client_to_a_plaintext_server_fails_cleanly(
    server: BeanstalkServer, certs: Certs
) -> None:
    # Neither server answers a ClientHello: the handshake runs out at connect_timeout.
    with pytest.raises(ConnectFailed, match="TLS handshake"):
        Client((server.host, server.port), ssl=certs.client_context(),
               server_hostname="localhost", timeout=2)


def test_tls_over_a_unix_socket(certs: Certs) -> None:
    server = start_server("bundled", unix=True, args=certs.server_args)
    try:
        with pytest.raises(TLSError, match="server_hostname"):  # no host to check
            Client(server.unix_path, ssl=certs.client_context())
        with Client(server.unix_path, ssl=certs.client_context(),
                    server_hostname="localhost") as client:
            assert client.use("over-unix") == "over-unix"
    finally:
        server.stop()


def test_ssl_option_is_type_checked() -> None:
    with pytest.raises(TypeError, match="ssl="):
        AsyncClient("127.0.0.1", ssl="yes")  # type: ignore[arg-type]


def test_worker_given_a_tls_client_keeps_tls(tls_server: TLSBeanstalk, tube: str) -> None:
    # The worker opens its own connections like the client it was given: TLS ones.
    seen = threading.Event()
    with Client(tls_server.address, ssl=tls_server.context, timeout=5) as client:
        client.use(tube)
        client.put(b"over tls")
        worker = Worker(client, tubes=[tube])

        def handle(job: Job) -> None:
            if job.body == b"over tls":
                seen.set()

        thread = threading.Thread(target=worker.run, args=(handle,),
                                  kwargs={"handle_signals": False}, daemon=True)
        thread.start()
        try:
            assert seen.wait(5), "the worker did not get the job over TLS"
        finally:
            worker.stop()
            thread.join(10)


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_tls_to_a_silent_peer_is_a_tls_error_at_connect_timeout(
    certs: Certs, timeout: float | None
) -> None:
    # A peer that accepts and never answers the ClientHello: bounded by connect_timeout even
    # when replies may take for ever (timeout=None), and the same TLSError as any refusal.
    with silent_peer() as port, pytest.raises(TLSError, match=r"no TLS handshake within 0\.3 s"):
        Client(("127.0.0.1", port), ssl=certs.client_context(), server_hostname="localhost",
               timeout=timeout, connect_timeout=0.3)


@pytest.mark.anyio
@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_async_tls_to_a_silent_peer_is_a_tls_error_at_connect_timeout(
    certs: Certs, timeout: float | None
) -> None:
    with silent_peer() as port:
        client = AsyncClient(("127.0.0.1", port), ssl=certs.client_context(),
                             server_hostname="localhost", timeout=timeout, connect_timeout=0.3)
        with pytest.raises(TLSError, match=r"no TLS handshake within 0\.3 s"):
            await client.connect()
        await client.aclose()


@pytest.fixture(scope="module")
def mtls_address(certs: Certs) -> Iterator[tuple[str, int]]:
    """The bundled server serving mutual TLS (``--tls-client-ca``): the test CA's clients."""
    server = start_server("bundled", args=certs.mtls_args)
    yield ("localhost", server.port)
    server.stop()


def test_mutual_tls_serves_only_clients_of_the_ca(
    mtls_address: tuple[str, int], certs: Certs
) -> None:
    with Client(mtls_address, ssl=certs.client_context(cert=True), timeout=5) as client:
        assert client.use("mtls") == "mtls"
    for refused in (certs.client_context(), certs.foreign_client_context()):
        with pytest.raises(TLSError, match="certificate"), Client(
            mtls_address, ssl=refused, timeout=5
        ) as client:
            client.list_tube_used()


@pytest.mark.anyio
async def test_async_mutual_tls_serves_only_clients_of_the_ca(
    mtls_address: tuple[str, int], certs: Certs
) -> None:
    async with AsyncClient(mtls_address, ssl=certs.client_context(cert=True)) as client:
        assert await client.use("mtls") == "mtls"
    for refused in (certs.client_context(), certs.foreign_client_context()):
        client = AsyncClient(mtls_address, ssl=refused, timeout=5)
        with pytest.raises(TLSError, match="certificate"):
            await client.connect()
            await client.list_tube_used()
        await client.aclose()
