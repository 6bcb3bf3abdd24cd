"""Gearman workers over TLS (``ssl=``) against the bundled server serving TLS: a certificate the
worker does not trust is logged as a warning and retried with back-off, never a plaintext
fallback; a trusted one works. (``test_tls.py`` has the clients, and a worker job over TLS.)"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import anyio
import pytest

from gearman_client import AsyncJob, AsyncWorker, Worker

from ..tlsrelay import Certs, make_certs, untrusted_context
from ..waiting import await_until
from .conftest import GearmanServer, start_gearman


@pytest.fixture(scope="module")
def certs() -> Certs:
    return make_certs()


@pytest.fixture(scope="module")
def tls_server(certs: Certs) -> Iterator[GearmanServer]:
    server = start_gearman("bundled", extra=certs.server_args)
    yield server
    server.stop()


@pytest.mark.anyio
async def test_untrusted_certificate_is_a_warning_and_retried(
    tls_server: GearmanServer, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gearman_client.worker")
    function = f"tls-u-{uuid.uuid4().hex[:8]}"

    async def handler(job: AsyncJob) -> bytes:
        return b"never"

    worker = AsyncWorker(("localhost", tls_server.port), ssl=untrusted_context())
    worker.register(function, handler)
    def refusals() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.WARNING]

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            # refused, and refused again after the back-off
            await await_until(lambda: len(refusals()) >= 2, what="two refusals")
            worker.stop()
    assert all("certificate" in r.getMessage() for r in refusals()), refusals()


def test_bad_ssl_fails_in_the_constructor() -> None:
    with pytest.raises(TypeError, match="ssl="):
        Worker("127.0.0.1", ssl="yes")
    with pytest.raises(TypeError, match="ssl="):
        AsyncWorker("127.0.0.1", ssl=1)  # type: ignore[arg-type]
