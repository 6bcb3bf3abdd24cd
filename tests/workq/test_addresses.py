"""Every address form reaches the server, for every Workq class; every bad one (a unix path
too: Workq listens on TCP only) is refused when the object is built. Against the bundled
server (the real Workq server is not packaged here)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest

from jobwire import InvalidAddress
from workq_client import AsyncClient, AsyncWorker, Client, JobContext, Worker

from .conftest import WorkqServer

FORMS: dict[str, Callable[[WorkqServer], tuple[object, ...]]] = {
    "url": lambda s: (s.url,),
    "tuple": lambda s: ((s.host, s.port),),
    "host:port": lambda s: (f"{s.host}:{s.port}",),
    "host, port": lambda s: (s.host, s.port),
}
BAD: list[tuple[object, type[Exception]]] = [
    (("127.0.0.1", "9922"), TypeError),
    (9922, TypeError),
    ("127.0.0.1:0", ValueError),
    ("/run/workq.sock", ValueError),
    ("unix:///run/workq.sock", ValueError),
    ("beanstalk://127.0.0.1", ValueError),
]


def _args(server: WorkqServer, form: str) -> tuple[tuple[object, ...], dict[str, object]]:
    """Positional address and, for the "host, port" form, port= (workers take names next)."""
    args = FORMS[form](server)
    return args[:1], ({"port": args[1]} if len(args) == 2 else {})


@pytest.mark.parametrize("form", FORMS)
def test_client_and_worker_every_form(workq_server: WorkqServer, qname: str, form: str) -> None:
    with Client(*FORMS[form](workq_server)) as client:
        client.add(qname, b"payload", ttr=5, ttl=60)
    got: list[bytes] = []
    (address,), port = _args(workq_server, form)
    worker: Worker

    def handle(job: JobContext) -> bytes:
        got.append(job.payload)
        worker.stop()
        return b""

    worker = Worker(address, qname, wait=0.2, **port)  # type: ignore[arg-type]
    thread = threading.Thread(target=worker.run, args=(handle,), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert got == [b"payload"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.anyio
async def test_async_classes_every_form(workq_server: WorkqServer, qname: str, form: str) -> None:
    async with AsyncClient(*FORMS[form](workq_server)) as client:
        await client.add(qname, b"payload", ttr=5, ttl=60)
    got: list[bytes] = []
    (address,), port = _args(workq_server, form)
    worker: AsyncWorker

    async def handle(job: JobContext) -> bytes:
        got.append(job.payload)
        worker.stop()
        return b""

    worker = AsyncWorker(address, qname, wait=0.2, **port)  # type: ignore[arg-type]
    with anyio.fail_after(10):
        await worker.run(handle)
    assert got == [b"payload"]


@pytest.mark.parametrize(("bad", "error"), BAD)
def test_bad_address_refused_at_construction(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        AsyncClient(bad)  # type: ignore[arg-type]
    with pytest.raises(error):
        Client(bad)  # type: ignore[arg-type]
    with pytest.raises(error):
        AsyncWorker(bad, "q")  # type: ignore[arg-type]
    with pytest.raises(error):
        Worker(bad, "q")  # type: ignore[arg-type]
    with pytest.raises(InvalidAddress):
        AsyncClient("127.0.0.1:9922", 9922)
