"""Every address form reaches the server, for every Gearman class (the forms libgearman, gear
and pygearman users bring: "host:port", lists, comma-separated strings); every bad one is
refused when the object is built. Against the bundled server and gearmand."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest

from gearman_client import (
    Admin,
    AsyncAdmin,
    AsyncClient,
    AsyncJob,
    AsyncWorker,
    Client,
    Job,
    Worker,
)
from jobwire import InvalidAddress

from .conftest import GearmanServer

FORMS: dict[str, Callable[[GearmanServer], tuple[object, ...]]] = {
    "url": lambda s: (s.url,),
    "host:port": lambda s: (f"{s.host}:{s.port}",),
    "[host:port]": lambda s: ([f"{s.host}:{s.port}"],),
    "tuple": lambda s: ((s.host, s.port),),
    "[tuple]": lambda s: ([(s.host, s.port)],),
    "host, port": lambda s: (s.host, s.port),
}
BAD: list[tuple[object, type[Exception]]] = [
    (("127.0.0.1", "4730"), ValueError),  # a list of two servers, the second a bare number
    (4730, TypeError),
    ([], ValueError),
    ("127.0.0.1:0", ValueError),
    ("127.0.0.1:4730,", ValueError),
    ("beanstalk://127.0.0.1", ValueError),
]


@pytest.mark.parametrize("form", FORMS)
def test_client_worker_admin_every_form(
    gearman_server: GearmanServer, function: str, form: str
) -> None:
    args = FORMS[form](gearman_server)
    worker = Worker(*args)

    def reverse(job: Job) -> bytes:
        return job.data[::-1]

    worker.register(function, reverse)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        with Client(*args, timeout=10) as client:
            assert client.submit(function, b"abc") == b"cba"
        if form not in ("[host:port]", "[tuple]"):  # an admin talks to one server
            with Admin(*args) as admin:
                assert any(s.function == function for s in admin.status())
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.anyio
async def test_async_classes_every_form(
    gearman_server: GearmanServer, function: str, form: str
) -> None:
    args = FORMS[form](gearman_server)
    worker = AsyncWorker(*args)

    async def upper(job: AsyncJob) -> bytes:
        return job.data.upper()

    worker.register(function, upper)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        async with AsyncClient(*args) as client:
            assert await client.submit(function, b"abc") == b"ABC"
        if form not in ("[host:port]", "[tuple]"):
            async with AsyncAdmin(*args) as admin:
                assert any(s.function == function for s in await admin.status())
        worker.stop()


def test_comma_separated_servers(gearman_server: GearmanServer, function: str) -> None:
    # libgearman's --servers / GEARMAN_SERVERS form; the second server is down: fail-over.
    down = "127.0.0.1:1"
    with Client(f"{down},{gearman_server.host}:{gearman_server.port}", timeout=10) as client:
        handle = client.submit_background(function, b"x")
        assert client.get_status(handle).known


@pytest.mark.parametrize(("bad", "error"), BAD)
@pytest.mark.parametrize("cls", [Client, AsyncClient, Worker, AsyncWorker, Admin, AsyncAdmin])
def test_bad_address_refused_at_construction(
    cls: type, bad: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        cls(bad)


def test_admin_takes_one_server(gearman_server: GearmanServer) -> None:
    with pytest.raises(InvalidAddress):
        AsyncAdmin(["127.0.0.1:4730", "127.0.0.1:4731"])
    with pytest.raises(InvalidAddress):
        AsyncClient(gearman_server.url, gearman_server.port)
