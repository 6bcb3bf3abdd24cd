"""``serializer=`` on the beanstalk clients, against the bundled server and the real beanstalkd:
``str`` and JSON bodies both ways, a body the serializer cannot write refused at the call with
nothing sent, and a body it cannot read reported with the job's id so the job can be settled."""

from __future__ import annotations

import pytest

from beanstalk_client import AsyncClient, Client, Job
from jobwire.serializers import JSON, TEXT, DeserializationError, SerializationError, Text

from ..conftest import BeanstalkServer


def _ready(server: BeanstalkServer, tube: str) -> int:
    with Client(server.url) as admin:
        try:
            return admin.stats_tube(tube)["current-jobs-ready"]
        except Exception:  # NotFound: the tube does not exist, so nothing was put
            return 0


def test_str_bodies_both_ways(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url, serializer=TEXT) as client:
        client.use(tube)
        client.watch(tube)
        job_id = client.put("héllo wörld")
        assert client.peek(job_id) == Job(job_id, "héllo wörld")
        job = client.reserve(wait=5)
        assert job == Job(job_id, "héllo wörld")
        client.delete(job)
        ids = client.put_many(["a", "é", ""])
        jobs = [client.reserve(wait=5) for _ in ids]
        assert [job.body for job in jobs] == ["a", "é", ""]
        client.delete_many(jobs)
    with Client(server.url) as raw:  # on the wire: UTF-8
        raw.use(tube)
        raw.watch(tube)
        raw.put("é".encode())
        assert raw.reserve(wait=5).body == b"\xc3\xa9"


def test_json_bodies(server: BeanstalkServer, tube: str) -> None:
    with Client(server.url, serializer=JSON) as client:
        client.use(tube)
        client.watch(tube)
        client.put({"to": "a@example.com", "n": [1, 2.5, None]})
        assert client.peek_ready().body == {"to": "a@example.com", "n": [1, 2.5, None]}
        assert client.reserve_job(client.peek_ready()).body["n"] == [1, 2.5, None]


def test_what_the_serializer_cannot_write_is_refused_before_anything_is_sent(
    server: BeanstalkServer, tube: str
) -> None:
    with Client(server.url) as raw:
        raw.use(tube)
        with pytest.raises(SerializationError, match="pass serializer=TEXT"):
            raw.put("a str to a bytes client")  # type: ignore[arg-type]
        with pytest.raises(SerializationError, match="body 1 cannot"):
            raw.put_many([b"ok", "not bytes", b"ok"])  # type: ignore[list-item]
        assert raw.list_tube_used() == tube  # the connection is fine
    with Client(server.url, serializer=Text("latin-1")) as latin:
        latin.use(tube)
        with pytest.raises(SerializationError, match="can't encode") as info:
            latin.put("€")
        assert isinstance(info.value.__cause__, UnicodeEncodeError)
    with Client(server.url, serializer=JSON) as client:
        client.use(tube)
        with pytest.raises(SerializationError):
            client.put({"nan": float("nan")})
    assert _ready(server, tube) == 0  # not one put reached the server


def test_a_body_the_serializer_cannot_read_names_the_job(
    server: BeanstalkServer, tube: str
) -> None:
    with Client(server.url) as raw, Client(server.url, serializer=TEXT) as client:
        raw.use(tube)
        client.watch(tube)
        job_id = raw.put(b"\xff\xfe not UTF-8")
        with pytest.raises(DeserializationError) as info:
            client.peek(job_id)
        with pytest.raises(DeserializationError) as info:
            client.reserve(wait=5)
        assert (info.value.job_id, info.value.data) == (job_id, b"\xff\xfe not UTF-8")
        client.bury(info.value.job_id)  # reserved by this connection: it can settle it
        assert client.stats_job(job_id)["state"] == "buried"
        raw.put(b"still usable")
        assert client.reserve(wait=5).body == "still usable"


@pytest.mark.anyio
async def test_the_async_client(server: BeanstalkServer, tube: str) -> None:
    async with AsyncClient(server.url, serializer=TEXT) as client:
        await client.use(tube)
        await client.watch(tube)
        await client.put_many(["ä", "ö"])
        jobs = [await client.reserve(wait=5) for _ in range(2)]
        assert [job.body for job in jobs] == ["ä", "ö"]
        await client.delete_many(jobs)
        with pytest.raises(SerializationError):
            await client.put(b"bytes to a str client")  # type: ignore[arg-type]
        async with AsyncClient(server.url) as raw:
            await raw.use(tube)
            job_id = await raw.put(b"\x80")
        with pytest.raises(DeserializationError) as info:
            await client.reserve(wait=5)
        assert info.value.job_id == job_id
        await client.delete(job_id)
