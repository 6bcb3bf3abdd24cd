"""TLS end to end: ``ssl=`` and ``server_hostname=`` on the Gearman clients and admin, sync,
asyncio and trio, with certificates made by ``trustme``: against the bundled server serving TLS
(``--tls-cert``) and against the real gearmand behind a TLS-terminating relay (stunnel's setup).
Debian's gearmand is built without SSL: its ``--ssl`` flags are accepted and ignored, and it
serves plaintext (docs/gearman.md; the last tests pin that down). A certificate that is not
trusted, or not for the host name asked for, is a ``TLSError``: never a plaintext fallback.

The module's worker reaches the server over plaintext (directly to gearmand, or through a relay
that adds TLS to the bundled server), so that the client tests do not depend on the worker;
``test_worker_over_tls`` runs a worker with ``ssl=``."""

from __future__ import annotations

import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import pytest

from gearman_client import Admin, AsyncAdmin, AsyncClient, AsyncJob, AsyncWorker, Client, Worker
from jobwire import ConnectFailed, ConnectionLost, TLSError

from ..conftest import free_port, stop_process
from ..tlsrelay import Certs, Relay, make_certs, silent_peer, untrusted_context
from ..waiting import wait_until
from .conftest import ROOT, GearmanServer, gearmand_binary, need, start_gearman


@dataclass
class TLSGearman:
    kind: str
    port: int  # where TLS is served, on 127.0.0.1 (certificate: "localhost")
    context: ssl.SSLContext  # trusts the test CA
    function: str  # served by a worker for the module: returns the data reversed

    @property
    def address(self) -> tuple[str, int]:
        return ("localhost", self.port)


@pytest.fixture(scope="module")
def certs() -> Certs:
    return make_certs()


@pytest.fixture(
    scope="module", params=["bundled", pytest.param("gearmand", marks=pytest.mark.real_server)]
)
def tls_gearman(request: pytest.FixtureRequest, certs: Certs) -> Iterator[TLSGearman]:
    """The bundled server with ``--tls-cert``, or gearmand behind a TLS relay; and a worker."""
    if request.param == "bundled":
        server = start_gearman("bundled", extra=certs.server_args)
        relay = Relay((server.host, server.port), connect_tls=certs.client_context(),
                      server_hostname="localhost")
        tls_port, worker_port = server.port, relay.port
    else:
        server = start_gearman("gearmand")
        relay = Relay((server.host, server.port), accept_tls=certs.server_context())
        tls_port, worker_port = relay.port, server.port
    function = f"tls-{uuid.uuid4().hex[:12]}"
    worker = Worker(("127.0.0.1", worker_port), concurrency=4)
    worker.register(function, lambda job: job.data[::-1])
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield TLSGearman(request.param, tls_port, certs.client_context(), function)
    worker.stop()
    thread.join(10)
    relay.close()
    server.stop()


def test_submit_echo_and_admin_over_tls(tls_gearman: TLSGearman) -> None:
    big = bytes(range(256)) * 1200  # 300 KiB each way: many TLS records
    with Client(tls_gearman.address, ssl=tls_gearman.context, timeout=10) as client:
        assert client.ssl_context is tls_gearman.context
        assert client.echo(b"ping") == b"ping"
        assert client.submit(tls_gearman.function, b"hello") == b"olleh"
        assert client.submit(tls_gearman.function, big) == big[::-1]
        handles = client.submit_background_many([(tls_gearman.function, b"bg")] * 100)
        assert len(set(handles)) == 100
    with Admin(tls_gearman.address, ssl=tls_gearman.context, timeout=10) as admin:
        assert admin.version().startswith("1.1.20")
        assert any(s.function == tls_gearman.function and s.workers >= 1
                   for s in admin.status())


@pytest.mark.anyio
async def test_async_submit_echo_and_admin_over_tls(tls_gearman: TLSGearman) -> None:
    client = AsyncClient(tls_gearman.address, ssl=tls_gearman.context, timeout=10)
    async with client:
        assert await client.echo(b"x" * 70_000) == b"x" * 70_000
        results: dict[int, bytes] = {}

        async def one(i: int) -> None:  # many tasks share the one TLS stream
            results[i] = await client.submit(tls_gearman.function, b"job %d" % i)

        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(one, i)
        assert results == {i: (b"job %d" % i)[::-1] for i in range(30)}
        job = await client.start(tls_gearman.function, b"abc")
        assert await job.result() == b"cba"
    async with AsyncAdmin(tls_gearman.address, ssl=tls_gearman.context, timeout=10) as admin:
        assert any(w.functions for w in await admin.workers())


def test_untrusted_certificate_is_a_tls_error(tls_gearman: TLSGearman) -> None:
    with Client(tls_gearman.address, ssl=untrusted_context(), timeout=5) as client:
        with pytest.raises(TLSError, match="certificate"):
            client.echo(b"x")
        with pytest.raises(TLSError):  # backing off after it: still the same kind of error
            client.echo(b"x")
    with pytest.raises(TLSError, match="certificate"):
        Admin(tls_gearman.address, ssl=untrusted_context(), timeout=5).__enter__()


@pytest.mark.anyio
async def test_async_untrusted_certificate_is_a_tls_error(tls_gearman: TLSGearman) -> None:
    async with AsyncClient(tls_gearman.address, ssl=untrusted_context(), timeout=5) as client:
        with pytest.raises(TLSError, match="certificate"):
            await client.submit(tls_gearman.function, b"x")
    admin = AsyncAdmin(tls_gearman.address, ssl=untrusted_context(), timeout=5)
    with pytest.raises(TLSError, match="certificate"):
        await admin.__aenter__()
    await admin.aclose()


def test_ssl_true_is_the_default_verifying_context(tls_gearman: TLSGearman) -> None:
    # The system's CAs do not know the test CA: refused, not a plaintext fallback.
    with Client(tls_gearman.address, ssl=True, timeout=5) as client:
        assert client.ssl_context is not None
        assert client.ssl_context.verify_mode == ssl.CERT_REQUIRED
        assert client.ssl_context.check_hostname
        with pytest.raises(TLSError, match="certificate"):
            client.echo(b"x")
    with pytest.raises(TLSError, match="certificate"):
        Admin(tls_gearman.address, ssl=True, timeout=5).__enter__()


def test_host_name_is_checked_and_server_hostname_overrides(tls_gearman: TLSGearman) -> None:
    by_ip = ("127.0.0.1", tls_gearman.port)  # the certificate is for "localhost"
    with Client(by_ip, ssl=tls_gearman.context, timeout=5) as client, pytest.raises(
        TLSError, match="certificate"
    ):
        client.echo(b"x")
    with pytest.raises(TLSError, match="certificate"):
        Admin(by_ip, ssl=tls_gearman.context, timeout=5).__enter__()
    with Client(by_ip, ssl=tls_gearman.context, server_hostname="localhost") as client:
        assert client.submit(tls_gearman.function, b"ip") == b"pi"
    with Admin(by_ip, ssl=tls_gearman.context, server_hostname="localhost") as admin:
        assert admin.getpid() > 0


@pytest.mark.anyio
async def test_async_host_name_is_checked(tls_gearman: TLSGearman) -> None:
    by_ip = ("127.0.0.1", tls_gearman.port)
    async with AsyncClient(by_ip, ssl=tls_gearman.context, timeout=5) as client:
        with pytest.raises(TLSError, match="certificate"):
            await client.echo(b"x")
    async with AsyncClient(by_ip, ssl=tls_gearman.context, server_hostname="localhost",
                           timeout=5) as client:
        assert await client.echo(b"y") == b"y"


def test_several_servers_share_one_ssl(tls_gearman: TLSGearman) -> None:
    # The same ssl= for every server: the one reached by IP fails its host name check and the
    # calls fail over to the one reached by name.
    servers = [f"127.0.0.1:{tls_gearman.port}", f"localhost:{tls_gearman.port}"]
    with Client(servers, ssl=tls_gearman.context, timeout=5) as client:
        for i in range(6):  # round-robin: every other call tries 127.0.0.1 first
            assert client.submit(tls_gearman.function, b"%d" % i) == b"%d" % i
    # No server left: a TLSError when one refused TLS, even if another was simply down.
    down = f"127.0.0.1:{free_port()}"
    with Client([down, f"127.0.0.1:{tls_gearman.port}"], ssl=tls_gearman.context,
                timeout=5) as client, pytest.raises(TLSError, match="certificate"):
        client.echo(b"x")


def test_plaintext_client_to_a_tls_port_fails_cleanly(tls_gearman: TLSGearman) -> None:
    # The server refuses the handshake and closes: an error at once, never a hang.
    with Client(tls_gearman.address, timeout=5) as client, pytest.raises(ConnectionLost):
        client.echo(b"x")
    with Admin(tls_gearman.address, timeout=5) as admin, pytest.raises(ConnectionLost):
        admin.version()


def test_tls_client_to_a_plaintext_server_fails_cleanly(
    gearman_server: GearmanServer, certs: Certs
) -> None:
    with Client(gearman_server.address, ssl=certs.client_context(), server_hostname="localhost",
                timeout=2) as client, pytest.raises(ConnectFailed, match="TLS handshake"):
        client.echo(b"x")


def test_ssl_option_is_type_checked() -> None:
    with pytest.raises(TypeError, match="ssl="):
        Client("127.0.0.1", ssl="on")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ssl="):
        AsyncAdmin("127.0.0.1", ssl=1.0)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_worker_over_tls(tls_gearman: TLSGearman) -> None:
    async def handler(job: AsyncJob) -> bytes:
        return b"tls:" + job.data

    worker = AsyncWorker(tls_gearman.address, ssl=tls_gearman.context)
    function = f"tls-w-{uuid.uuid4().hex[:8]}"
    worker.register(function, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        async with AsyncClient(tls_gearman.address, ssl=tls_gearman.context) as client:
            assert await client.submit(function, b"x") == b"tls:x"
        worker.stop()


# -- Debian's gearmand and its --ssl flags ------------------------------------------------------


@pytest.fixture(scope="module")
def gearmand_ssl(certs: Certs) -> Iterator[int]:
    """gearmand 1.1.20 started as its docs say for SSL: ``--ssl --ssl-ca-file --ssl-certificate
    --ssl-key``."""
    binary = need(gearmand_binary(), "gearmand")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--listen=127.0.0.1", f"--port={port}", "--log-file=none", "--threads=0",
         "--ssl", "--ssl-ca-file", certs.ca_file, "--ssl-certificate", certs.cert_file,
         "--ssl-key", certs.key_file],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        def echoes() -> bool:
            assert proc.poll() is None, f"gearmand exited with {proc.returncode}"
            with Client(("127.0.0.1", port), timeout=1) as probe:
                return probe.echo(b"up") == b"up"

        wait_until(echoes, 10, "gearmand --ssl to answer an echo",
                   ignoring=(ConnectFailed, ConnectionLost), interval=0.05)
        yield port
    finally:
        stop_process(proc)


@pytest.mark.real_server
def test_debian_gearmand_ssl_flags_give_plaintext(gearmand_ssl: int, certs: Certs) -> None:
    # Built without SSL, gearmand reads the ClientHello as a packet (INVALID_MAGIC) and closes:
    # a TLS client gets a TLSError at once, and plaintext is what that port serves.
    refused = pytest.raises(TLSError, match="closed the connection during the TLS handshake")
    with Client(("localhost", gearmand_ssl), ssl=certs.client_context(), timeout=5) as client, \
            refused:
        client.echo(b"x")
    with Client(("127.0.0.1", gearmand_ssl), timeout=5) as client:
        assert client.echo(b"plain") == b"plain"


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_tls_to_a_silent_peer_is_a_tls_error_at_connect_timeout(
    certs: Certs, timeout: float | None
) -> None:
    # A peer that accepts and never answers the ClientHello: bounded by connect_timeout even
    # when replies may take for ever (timeout=None), and the same TLSError as any refusal.
    expected = r"no TLS handshake within 0\.3 s"
    with silent_peer() as port:
        address = ("127.0.0.1", port)
        tls = {"ssl": certs.client_context(), "server_hostname": "localhost",
               "timeout": timeout, "connect_timeout": 0.3}
        with Client(address, **tls) as client, pytest.raises(TLSError, match=expected):
            client.echo(b"x")
        with pytest.raises(TLSError, match=expected), Admin(address, **tls) as admin:
            admin.version()


@pytest.mark.anyio
@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_async_tls_to_a_silent_peer_is_a_tls_error_at_connect_timeout(
    certs: Certs, timeout: float | None
) -> None:
    expected = r"no TLS handshake within 0\.3 s"
    with silent_peer() as port:
        address = ("127.0.0.1", port)
        tls = {"ssl": certs.client_context(), "server_hostname": "localhost",
               "timeout": timeout, "connect_timeout": 0.3}
        async with AsyncClient(address, **tls) as client:
            with pytest.raises(TLSError, match=expected):
                await client.echo(b"x")
        admin = AsyncAdmin(address, **tls)
        with pytest.raises(TLSError, match=expected):
            await admin.__aenter__()
        await admin.aclose()


@pytest.fixture(scope="module")
def mtls_address(certs: Certs) -> Iterator[tuple[str, int]]:
    """The bundled server serving mutual TLS (``--tls-client-ca``): the test CA's clients."""
    server = start_gearman("bundled", extra=certs.mtls_args)
    yield ("localhost", server.port)
    server.stop()


def test_mutual_tls_serves_only_clients_of_the_ca(
    mtls_address: tuple[str, int], certs: Certs
) -> None:
    with Client(mtls_address, ssl=certs.client_context(cert=True), timeout=5) as client:
        assert client.echo(b"mtls") == b"mtls"
    with Admin(mtls_address, ssl=certs.client_context(cert=True), timeout=5) as admin:
        assert admin.version()
    for refused in (certs.client_context(), certs.foreign_client_context()):
        with Client(mtls_address, ssl=refused, timeout=5) as client, pytest.raises(
            TLSError, match="certificate"
        ):
            client.echo(b"x")
        with pytest.raises(TLSError, match="certificate"), Admin(
            mtls_address, ssl=refused, timeout=5
        ) as admin:
            admin.version()


@pytest.mark.anyio
async def test_async_mutual_tls_serves_only_clients_of_the_ca(
    mtls_address: tuple[str, int], certs: Certs
) -> None:
    async with AsyncClient(mtls_address, ssl=certs.client_context(cert=True)) as client:
        assert await client.echo(b"mtls") == b"mtls"
    for refused in (certs.client_context(), certs.foreign_client_context()):
        async with AsyncClient(mtls_address, ssl=refused, timeout=5) as client:
            with pytest.raises(TLSError, match="certificate"):
                await client.echo(b"x")


@pytest.mark.anyio
async def test_worker_with_a_client_certificate(
    mtls_address: tuple[str, int], certs: Certs
) -> None:
    async def handler(job: AsyncJob) -> bytes:
        return b"mtls:" + job.data

    context = certs.client_context(cert=True)
    worker = AsyncWorker(mtls_address, ssl=context)
    function = f"mtls-w-{uuid.uuid4().hex[:8]}"
    worker.register(function, handler)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        async with AsyncClient(mtls_address, ssl=context, timeout=10) as client:
            assert await client.submit(function, b"x") == b"mtls:x"
        worker.stop()
