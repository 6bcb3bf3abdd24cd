"""TLS end to end against a real redis-server listening with TLS (Debian's build has it), with
certificates made by ``trustme``: ``rediss://`` URLs and ``ssl=`` on the Redis connections and
the qless client, sync, asyncio and trio. A certificate that is not trusted, or not for the
host name asked for, is a ``TLSError`` at connect: never a plaintext fallback."""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from jobwire import ConnectFailed, InvalidAddress, TLSError
from qless_client import (
    AsyncClient,
    AsyncJob,
    AsyncRedis,
    AsyncWorker,
    Client,
    Job,
    Redis,
    Worker,
)
from tests.conftest import free_port

from ..tlsrelay import silent_peer
from .conftest import RedisServer, _spawn, redis_binary

trustme = pytest.importorskip("trustme", reason="trustme (a test dependency) is not installed")


@dataclass
class TLSRedis:
    server: RedisServer
    tls_port: int
    context: ssl.SSLContext  # trusts the test CA
    cert_context: ssl.SSLContext  # the same, presenting a client certificate from the test CA

    @property
    def url(self) -> str:
        return f"rediss://localhost:{self.tls_port}"


@pytest.fixture(scope="module")
def tls_redis() -> Iterator[TLSRedis]:
    yield from _tls_redis(auth_clients=False)


@pytest.fixture(scope="module")
def mtls_redis() -> Iterator[TLSRedis]:
    """redis-server with ``--tls-auth-clients yes``: only clients with a certificate from the
    test CA are served."""
    yield from _tls_redis(auth_clients=True)


def _tls_redis(*, auth_clients: bool) -> Iterator[TLSRedis]:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")  # not 127.0.0.1: the host name check is tested too
    folder = tempfile.mkdtemp(prefix="jobwire-redis-tls-")
    cert_file, key_file, ca_file = (os.path.join(folder, n) for n in ("c.pem", "k.pem", "ca.pem"))
    cert.cert_chain_pems[0].write_to_path(cert_file)
    cert.private_key_pem.write_to_path(key_file)
    ca.cert_pem.write_to_path(ca_file)
    port, tls_port = free_port(), free_port()
    args = [
        redis_binary(), "--bind", "127.0.0.1", "--port", str(port), "--tls-port", str(tls_port),
        "--tls-cert-file", cert_file, "--tls-key-file", key_file, "--tls-ca-cert-file", ca_file,
        "--tls-auth-clients", "yes" if auth_clients else "no",
        "--save", "", "--appendonly", "no", "--dir", folder,
        "--unixsocket", os.path.join(folder, "redis.sock"),
    ]
    server = RedisServer(_spawn(args, port), port, os.path.join(folder, "redis.sock"), args)
    context = ssl.create_default_context()
    ca.configure_trust(context)
    client_cert = ca.issue_cert("client@example.org")
    cert_context = ssl.create_default_context()
    ca.configure_trust(cert_context)
    client_cert.configure_cert(cert_context)
    yield TLSRedis(server, tls_port, context, cert_context)
    server.stop()


def test_sync_rediss_round_trip_and_big_values(tls_redis: TLSRedis) -> None:
    big = os.urandom(16 << 20)
    with Redis(tls_redis.url, ssl=tls_redis.context) as redis:
        assert redis.execute("PING") == "PONG"
        assert redis.execute("SET", "big", big) == "OK"
        assert redis.execute("GET", "big") == big
        assert redis.pipeline([("INCR", "n")] * 1000)[-1] == 1000
        info = redis.execute("CLIENT", "INFO")
        assert isinstance(info, bytes)


@pytest.mark.anyio
async def test_async_rediss_round_trip_and_big_values(tls_redis: TLSRedis) -> None:
    big = os.urandom(16 << 20)
    async with AsyncRedis(tls_redis.url, ssl=tls_redis.context) as redis:
        assert await redis.execute("SET", "abig", big) == "OK"
        assert await redis.execute("GET", "abig") == big

        await redis.execute("DEL", "an")

        async def incr() -> None:
            await redis.execute("INCR", "an")

        async with anyio.create_task_group() as tg:
            for _ in range(200):
                tg.start_soon(incr)
        assert await redis.execute("GET", "an") == b"200"
        assert redis.connections == 1


def test_qless_client_over_tls(tls_redis: TLSRedis) -> None:
    with Client(tls_redis.url, ssl=tls_redis.context, db=3) as client:
        jid = client.queue("tls").put("K", {"secure": True})
        job = client.queue("tls").pop()
        assert job is not None
        assert job.jid == jid and job.data == {"secure": True}
        assert job.complete() == "complete"


@pytest.mark.anyio
async def test_async_qless_client_over_tls(tls_redis: TLSRedis) -> None:
    async with AsyncClient(tls_redis.url, ssl=tls_redis.context, db=4) as client:
        await client.queue("tls").put("K", 1)
        job = await client.queue("tls").pop()
        assert job is not None
        await job.complete()


def test_untrusted_certificate_is_refused(tls_redis: TLSRedis) -> None:
    # ssl=True / rediss:// alone: the system's CAs, which do not know the test CA
    with pytest.raises(TLSError, match="certificate"):
        Redis(tls_redis.url, timeout=5)
    with pytest.raises(TLSError):
        Redis(("localhost", tls_redis.tls_port), ssl=True, timeout=5)


@pytest.mark.anyio
async def test_async_untrusted_certificate_is_refused(tls_redis: TLSRedis) -> None:
    with pytest.raises(TLSError, match="certificate"):
        await AsyncRedis(tls_redis.url, timeout=5).connect()


def test_host_name_is_checked(tls_redis: TLSRedis) -> None:
    with pytest.raises(TLSError, match="certificate"):
        Redis(f"rediss://127.0.0.1:{tls_redis.tls_port}", ssl=tls_redis.context, timeout=5)
    # the name the certificate carries, when the address is an IP
    with Redis(f"rediss://127.0.0.1:{tls_redis.tls_port}", ssl=tls_redis.context,
               server_hostname="localhost", timeout=5) as redis:
        assert redis.execute("PING") == "PONG"


@pytest.mark.slow
def test_plaintext_to_a_tls_port_fails_cleanly(tls_redis: TLSRedis) -> None:
    with pytest.raises(ConnectFailed):  # the handshake never completes: no plaintext talk
        Redis(("localhost", tls_redis.server.port), ssl=tls_redis.context, timeout=3)
    with pytest.raises(InvalidAddress):
        Redis(tls_redis.url, ssl=False)


@pytest.mark.anyio
@pytest.mark.slow
async def test_async_plaintext_to_a_tls_port_fails_cleanly(tls_redis: TLSRedis) -> None:
    with pytest.raises(ConnectFailed):
        await AsyncRedis(("localhost", tls_redis.server.port), ssl=tls_redis.context,
                         timeout=3).connect()


@pytest.mark.anyio
async def test_workers_over_tls(tls_redis: TLSRedis) -> None:
    """The workers take the client's Redis options, ``ssl`` and ``server_hostname`` included:
    every job is popped and completed over TLS (an IP address, the certificate's name asked
    for), and a bad ``ssl=`` fails in the constructor."""
    url = f"rediss://127.0.0.1:{tls_redis.tls_port}/6"
    tls: dict[str, Any] = {"ssl": tls_redis.context, "server_hostname": "localhost"}
    async with AsyncClient(url, **tls) as client:
        jids = [await client.queue("tls-w").put("K", i) for i in range(3)]
    seen: list[str] = []

    async def handle(job: AsyncJob) -> None:
        seen.append(job.jid)
        if len(seen) == 3:
            worker.stop()

    worker = AsyncWorker(url, queues=["tls-w"], idle_wait=0.05, **tls)
    with anyio.fail_after(10):
        await worker.run(handle, handle_signals=False)
    assert sorted(seen) == sorted(jids) and worker.stats.completed == 3

    def handle_sync(job: Job) -> None:
        seen.append(job.jid)
        sync_worker.stop()

    async with AsyncClient(url, **tls) as client:
        jid = await client.queue("tls-w").put("K", "sync")
    sync_worker = Worker(url, queues=["tls-w"], idle_wait=0.05, **tls)
    thread = threading.Thread(target=sync_worker.run, args=(handle_sync,),
                              kwargs={"handle_signals": False}, daemon=True)
    thread.start()
    await anyio.to_thread.run_sync(thread.join, 10)
    assert not thread.is_alive() and seen[-1] == jid and sync_worker.stats.completed == 1
    async with AsyncClient(url, **tls) as client:
        for done in [*jids, jid]:
            job = await client.get(done)
            assert job is not None and job.state == "complete"
    with pytest.raises(TypeError, match="ssl="):
        Worker(url, queues=["tls-w"], ssl="yes")


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_tls_to_a_silent_peer_is_a_tls_error_at_connect_timeout(
    tls_redis: TLSRedis, timeout: float | None
) -> None:
    # A peer that accepts and never answers the ClientHello: bounded by connect_timeout even
    # when replies may take for ever (timeout=None), and the same TLSError as any refusal.
    with silent_peer() as port, pytest.raises(TLSError, match=r"no TLS handshake within 0\.3 s"):
        Redis(("127.0.0.1", port), ssl=tls_redis.context, server_hostname="localhost",
              timeout=timeout, connect_timeout=0.3)


@pytest.mark.anyio
@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_async_tls_to_a_silent_peer_is_a_tls_error_at_connect_timeout(
    tls_redis: TLSRedis, timeout: float | None
) -> None:
    with silent_peer() as port:
        redis = AsyncRedis(("127.0.0.1", port), ssl=tls_redis.context,
                           server_hostname="localhost", timeout=timeout, connect_timeout=0.3)
        with pytest.raises(TLSError, match=r"no TLS handshake within 0\.3 s"):
            await redis.connect()
        await redis.aclose()


def test_client_certificate_with_tls_auth_clients(mtls_redis: TLSRedis) -> None:
    with Redis(mtls_redis.url, ssl=mtls_redis.cert_context, timeout=5) as redis:
        assert redis.execute("PING") == "PONG"
    with Client(mtls_redis.url, ssl=mtls_redis.cert_context, db=5) as client:
        client.queue("mtls").put("K", 1)
        assert client.queue("mtls").pop() is not None
    with pytest.raises(TLSError, match="certificate"), Redis(  # no client certificate
        mtls_redis.url, ssl=mtls_redis.context, timeout=5
    ) as redis:
        redis.execute("PING")


@pytest.mark.anyio
async def test_async_client_certificate_with_tls_auth_clients(mtls_redis: TLSRedis) -> None:
    async with AsyncRedis(mtls_redis.url, ssl=mtls_redis.cert_context, timeout=5) as redis:
        assert await redis.execute("PING") == "PONG"
    redis = AsyncRedis(mtls_redis.url, ssl=mtls_redis.context, timeout=5)
    with pytest.raises(TLSError, match="certificate"):
        await redis.connect()
        await redis.execute("PING")
    await redis.aclose()
