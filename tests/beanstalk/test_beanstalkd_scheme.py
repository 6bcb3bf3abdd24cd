"""``beanstalkd://`` beside ``beanstalk://``: the server's own name, as greenstalk's users and
most beanstalk tooling write the URL. Accepted wherever a beanstalk address is (clients,
workers, the Spark source: they all resolve through ``jobwire._url``), refused for the other
protocols."""

from __future__ import annotations

import pytest

from beanstalk_client import AsyncClient, Client
from jobwire._url import TCPAddress, UnixAddress, parse_url, resolve_address
from jobwire.errors import InvalidAddress

from ..conftest import BeanstalkServer, start_server


def test_the_url_forms() -> None:
    def beanstalk(url: str) -> object:
        return resolve_address(url, scheme="beanstalk", default_port=11300)

    assert beanstalk("beanstalkd://10.0.0.5:11301") == TCPAddress("10.0.0.5", 11301)
    assert beanstalk("beanstalkd://10.0.0.5") == TCPAddress("10.0.0.5", 11300)
    assert beanstalk("BEANSTALKD://[::1]:2") == TCPAddress("::1", 2)
    assert beanstalk("beanstalkd+unix:///run/b.sock") == UnixAddress("/run/b.sock")
    assert beanstalk("beanstalk://h") == beanstalk("beanstalkd://h")
    for bad in ("beanstalkd://h:0", "beanstalkd://", "beanstalkd://h/path", "beanstalkx://h"):
        with pytest.raises(InvalidAddress):
            beanstalk(bad)


@pytest.mark.parametrize("scheme", ["gearman", "workq", "redis"])
def test_other_protocols_refuse_it(scheme: str) -> None:
    with pytest.raises(InvalidAddress, match=f"expected a {scheme}://"):
        parse_url("beanstalkd://h:1", scheme=scheme, default_port=1)
    with pytest.raises(InvalidAddress):
        parse_url("beanstalkd+unix:///x", scheme=scheme, default_port=1)


def test_clients_connect_with_it(server: BeanstalkServer, tube: str) -> None:
    url = f"beanstalkd://{server.host}:{server.port}"
    with Client(url) as producer, Client.from_url(url) as consumer:
        producer.use(tube)
        consumer.watch(tube)
        job_id = producer.put(b"via beanstalkd://")
        job = consumer.reserve(wait=5)
        assert (job.id, job.body) == (job_id, b"via beanstalkd://")
        consumer.delete(job)
        assert repr(producer).startswith(f"<beanstalk_client.Client beanstalk://{server.host}")


@pytest.mark.anyio
async def test_the_async_client_connects_with_it(server: BeanstalkServer, tube: str) -> None:
    async with AsyncClient(f"beanstalkd://{server.host}:{server.port}") as client:
        assert await client.use(tube) == tube
        job_id = await client.put(b"x")
        await client.delete(job_id)


def test_a_unix_socket_with_beanstalkd_unix() -> None:
    server = start_server("bundled", unix=True)
    try:
        with Client(f"beanstalkd+unix://{server.unix_path}") as client:
            assert client.list_tube_used() == "default"
    finally:
        server.stop()
