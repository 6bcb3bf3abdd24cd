"""TLS end to end: ``ssl=`` and ``server_hostname=`` on the Workq clients, sync, asyncio and
trio, against the bundled server serving TLS (``--tls-cert``; Workq itself speaks no TLS, people
put it behind stunnel), with certificates made by ``trustme``. Reconnects keep TLS. A
certificate that is not trusted, or not for the host name asked for, is a ``TLSError`` at
connect: never a plaintext fallback."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator

import anyio
import pytest

from jobwire import ConnectFailed, ConnectionLost, TLSError
from workq_client import AsyncClient, AsyncWorker, Client, JobContext
from workq_client.errors import DuplicateJob

from ..tlsrelay import Certs, make_certs, silent_peer, untrusted_context
from .conftest import WorkqServer, start_workq_server


@pytest.fixture(scope="module")
def certs() -> Certs:
    return make_certs()


@pytest.fixture(scope="module")
def tls_port(certs: Certs) -> Iterator[int]:
    """The bundled server serving TLS only, on 127.0.0.1 (certificate: "localhost")."""
    server = start_workq_server(args=certs.server_args)
    yield server.port
    server.stop()


@pytest.fixture
def context(certs: Certs) -> ssl.SSLContext:
    return certs.client_context()


def test_add_lease_complete_over_tls(tls_port: int, context: ssl.SSLContext, qname: str) -> None:
    big = bytes(range(256)) * 3000  # 750 KiB: many TLS records
    with Client(("localhost", tls_port), ssl=context, timeout=10) as client:
        job_id = client.add(qname, big)
        ids = client.add_many(qname, [b"%d" % i for i in range(200)])
        leased = client.lease(qname, wait=5)
        assert (leased.job_id, leased.payload) == (job_id, big)
        client.complete(leased.job_id, b"done:" + big[:1000])
        result = client.result(job_id, wait=1)
        assert result.success and result.data == b"done:" + big[:1000]
        for expected in ids:
            leased = client.lease(qname, wait=5)
            assert leased.job_id == expected
            client.complete(leased.job_id)
        assert client.connections == 1


@pytest.mark.anyio
async def test_async_add_lease_complete_over_tls(
    tls_port: int, context: ssl.SSLContext, qname: str
) -> None:
    async with AsyncClient(("localhost", tls_port), ssl=context, timeout=10) as client:
        added: list[str] = []

        async def add(i: int) -> None:
            added.append(await client.add(qname, b"job %d" % i + b"." * 20_000))

        async with anyio.create_task_group() as tg:  # many tasks share the one TLS stream
            for i in range(40):
                tg.start_soon(add, i)
        done = set()
        for _ in added:
            leased = await client.lease(qname, wait=5)
            await client.complete(leased.job_id, leased.payload[:6])
            done.add(leased.job_id)
        assert done == set(added)
        assert (await client.result(added[0], wait=1)).success


def test_reconnect_keeps_tls(tls_port: int, context: ssl.SSLContext, qname: str) -> None:
    # A duplicate add ends the connection (docs/workq.md); the next call opens a new one, over TLS
    # (the port speaks nothing else).
    with Client(("localhost", tls_port), ssl=context, timeout=5) as client:
        job_id = str(uuid.uuid4())
        client.add(qname, b"once", job_id=job_id)
        with pytest.raises(DuplicateJob):
            client.add(qname, b"twice", job_id=job_id)
        assert client.lease(qname, wait=5).payload == b"once"
        assert client.connections == 2


@pytest.mark.anyio
async def test_async_reconnect_keeps_tls(
    tls_port: int, context: ssl.SSLContext, qname: str
) -> None:
    async with AsyncClient(("localhost", tls_port), ssl=context, timeout=5) as client:
        job_id = str(uuid.uuid4())
        await client.add(qname, b"once", job_id=job_id)
        with pytest.raises(DuplicateJob):
            await client.add(qname, b"twice", job_id=job_id)
        assert (await client.lease(qname, wait=5)).payload == b"once"
        assert client.connections == 2


def test_untrusted_certificate_is_a_tls_error(tls_port: int) -> None:
    with pytest.raises(TLSError, match="certificate"):
        Client(("localhost", tls_port), ssl=untrusted_context(), timeout=5)


@pytest.mark.anyio
async def test_async_untrusted_certificate_is_a_tls_error(tls_port: int) -> None:
    client = AsyncClient(("localhost", tls_port), ssl=untrusted_context(), timeout=5)
    with pytest.raises(TLSError, match="certificate"):
        await client.connect()
    await client.aclose()


def test_ssl_true_is_the_default_verifying_context(tls_port: int) -> None:
    with pytest.raises(TLSError, match="certificate"):  # the system's CAs: not the test CA
        Client(("localhost", tls_port), ssl=True, timeout=5)
    context = AsyncClient(("localhost", tls_port), ssl=True).ssl_context
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_host_name_is_checked_and_server_hostname_overrides(
    tls_port: int, context: ssl.SSLContext, qname: str
) -> None:
    with pytest.raises(TLSError, match="certificate"):  # the certificate is for "localhost"
        Client(("127.0.0.1", tls_port), ssl=context, timeout=5)
    with Client(("127.0.0.1", tls_port), ssl=context, server_hostname="localhost",
                timeout=5) as client:
        assert client.add(qname, b"x")


@pytest.mark.anyio
async def test_async_host_name_is_checked(
    tls_port: int, context: ssl.SSLContext, qname: str
) -> None:
    client = AsyncClient(("127.0.0.1", tls_port), ssl=context, timeout=5)
    with pytest.raises(TLSError, match="certificate"):
        await client.connect()
    async with AsyncClient(("127.0.0.1", tls_port), ssl=context, server_hostname="localhost",
                           timeout=5) as client:
        assert await client.add(qname, b"x")


def test_plaintext_client_to_a_tls_port_fails_cleanly(tls_port: int, qname: str) -> None:
    # The server refuses the handshake and closes: an error at once, never a hang.
    with Client(("localhost", tls_port), timeout=5) as client, pytest.raises(ConnectionLost):
        client.add(qname, b"x")


def test_tls_client_to_a_plaintext_server_fails_cleanly(
    workq_server: WorkqServer, certs: Certs
) -> None:
    with pytest.raises(ConnectFailed, match="TLS handshake"):
        Client((workq_server.host, workq_server.port), ssl=certs.client_context(),
               server_hostname="localhost", timeout=2)


def test_ssl_option_is_type_checked() -> None:
    with pytest.raises(TypeError, match="ssl="):
        AsyncClient("127.0.0.1", ssl=b"on")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_worker_over_tls(tls_port: int, context: ssl.SSLContext, qname: str) -> None:
    async def handler(job: JobContext) -> bytes:
        return b"tls:" + job.payload

    worker = AsyncWorker(("localhost", tls_port), qname, ssl=context,
                         wait=0.5)
    async with AsyncClient(("localhost", tls_port), ssl=context, timeout=10) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handler)
            result = await client.run(qname, b"x", wait=5)
            worker.stop()
        assert result.data == b"tls:x"


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
def mtls_port(certs: Certs) -> Iterator[int]:
    """The bundled server serving mutual TLS (``--tls-client-ca``): the test CA's clients."""
    server = start_workq_server(args=certs.mtls_args)
    yield server.port
    server.stop()


def test_mutual_tls_serves_only_clients_of_the_ca(
    mtls_port: int, certs: Certs, qname: str
) -> None:
    with Client(("localhost", mtls_port), ssl=certs.client_context(cert=True),
                timeout=5) as client:
        client.add(qname, b"mtls")
    for refused in (certs.client_context(), certs.foreign_client_context()):
        with pytest.raises(TLSError, match="certificate"), Client(
            ("localhost", mtls_port), ssl=refused, timeout=5
        ) as client:
            client.add(qname, b"x")


@pytest.mark.anyio
async def test_async_mutual_tls_and_a_worker_with_a_client_certificate(
    mtls_port: int, certs: Certs, qname: str
) -> None:
    async def handler(job: JobContext) -> bytes:
        return b"mtls:" + job.payload

    context = certs.client_context(cert=True)
    worker = AsyncWorker(("localhost", mtls_port), qname, ssl=context, wait=0.5)
    async with AsyncClient(("localhost", mtls_port), ssl=context, timeout=10) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, handler)
            result = await client.run(qname, b"x", wait=5)
            worker.stop()
        assert result.data == b"mtls:x"
    for refused in (certs.client_context(), certs.foreign_client_context()):
        client = AsyncClient(("localhost", mtls_port), ssl=refused, timeout=5)
        with pytest.raises(TLSError, match="certificate"):
            await client.connect()
            await client.add(qname, b"x")
        await client.aclose()
