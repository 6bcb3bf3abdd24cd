"""Every address form reaches the server, for every beanstalk class; every bad one is refused
when the object is built (never inside ``run()``). Against the bundled server and beanstalkd."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest

from beanstalk_client import AsyncClient, Client, Job
from beanstalk_client.worker import AsyncWorker, Worker
from jobwire import InvalidAddress

from ..conftest import BeanstalkServer, start_server

FORMS: dict[str, Callable[[BeanstalkServer], tuple[object, ...]]] = {
    "url": lambda s: (s.url,),
    "tuple": lambda s: ((s.host, s.port),),
    "host:port": lambda s: (f"{s.host}:{s.port}",),
    "host, port": lambda s: (s.host, s.port),
}
BAD: list[tuple[object, type[Exception]]] = [
    (("127.0.0.1", "11300"), TypeError),
    (11300, TypeError),
    ("127.0.0.1:0", ValueError),
    ("127.0.0.1:x", ValueError),
    ("gearman://127.0.0.1", ValueError),
    ("a b:1", ValueError),
]


@pytest.mark.parametrize("form", FORMS)
def test_client_every_form(server: BeanstalkServer, tube: str, form: str) -> None:
    with Client(*FORMS[form](server)) as client:
        client.use(tube)
        job_id = client.put(b"x")
        assert client.peek(job_id).body == b"x"
        client.delete(job_id)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.anyio
async def test_async_client_every_form(server: BeanstalkServer, tube: str, form: str) -> None:
    async with AsyncClient(*FORMS[form](server)) as client:
        await client.use(tube)
        job_id = await client.put(b"x")
        assert (await client.peek(job_id)).body == b"x"
        await client.delete(job_id)


def test_unix_path_form() -> None:
    srv = start_server("bundled", unix=True)
    try:
        assert srv.unix_path is not None
        with Client(srv.unix_path) as client:
            assert client.list_tube_used() == "default"
    finally:
        srv.stop()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.anyio
async def test_async_worker_every_form(server: BeanstalkServer, tube: str, form: str) -> None:
    # The reported defect: AsyncWorker(("127.0.0.1", 11300), ...) failed inside run().
    args = FORMS[form](server)
    with Client(server.url) as producer:
        producer.use(tube)
        producer.put(b"job")
    got: list[bytes] = []
    worker = AsyncWorker(args[0], *args[1:], tubes=[tube])

    async def handler(job: Job) -> None:
        got.append(job.body)
        worker.stop()

    with anyio.fail_after(10):
        await worker.run(handler, handle_signals=False)
    assert got == [b"job"]


@pytest.mark.parametrize("form", FORMS)
def test_sync_worker_every_form(server: BeanstalkServer, tube: str, form: str) -> None:
    args = FORMS[form](server)
    with Client(server.url) as producer:
        producer.use(tube)
        producer.put(b"job")
    got: list[bytes] = []
    worker = Worker(args[0], *args[1:], tubes=[tube])

    def handler(job: Job) -> None:
        got.append(job.body)
        worker.stop()

    thread = threading.Thread(target=worker.run, args=(handler,), kwargs={"handle_signals": False})
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert got == [b"job"]


@pytest.mark.parametrize(("bad", "error"), BAD)
@pytest.mark.parametrize("cls", [AsyncClient, AsyncWorker, Worker])
def test_bad_address_refused_at_construction(
    cls: type, bad: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        cls(bad)


@pytest.mark.parametrize(("bad", "error"), BAD)
def test_sync_client_refuses_before_connecting(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        Client(bad)


def test_port_argument_with_a_full_address_is_refused(server: BeanstalkServer) -> None:
    with pytest.raises(InvalidAddress):
        AsyncClient(server.url, server.port)
    with pytest.raises(InvalidAddress):
        AsyncWorker((server.host, server.port), server.port)
    with pytest.raises(TypeError):
        AsyncWorker(AsyncClient(server.url), server.port)
