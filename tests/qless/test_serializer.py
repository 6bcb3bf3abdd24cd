"""``serializer=`` on the qless clients, against a real redis-server: JSON values by default,
your own type through a serializer that writes JSON, anything that is not JSON text refused at
the call with nothing sent, and data the serializer cannot read reported when ``job.data`` is
read, so the job (and the others of the same pop) can still be failed."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import pytest

from jobwire.errors import LocalProtocolError
from jobwire.serializers import TEXT, DeserializationError, Json, SerializationError
from qless_client import AsyncClient, Client
from qless_client._redis import Redis
from tests.qless.conftest import RedisServer


@dataclass(frozen=True)
class Point:
    x: int
    y: int


class PointJson:
    """Points as JSON objects (what a pydantic model's ``model_dump_json`` would do)."""

    def dumps(self, value: Point, /) -> bytes:
        return json.dumps(asdict(value)).encode()

    def loads(self, data: bytes, /) -> Point:
        return Point(**json.loads(data))


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def _stored(redis_server: RedisServer, jid: str) -> Any:
    with Redis(redis_server.url, db=9) as redis:
        raw = redis.execute("HGET", f"ql:j:{jid}", "data")
        return raw.decode() if isinstance(raw, bytes) else raw


def test_json_values_by_default(redis_server: RedisServer, queue: str) -> None:
    with Client(redis_server.url, db=9) as client:
        jid = client.queue(queue).put("k", {"to": "é", "n": [1, None]}, delay=timedelta(0))
        assert _stored(redis_server, jid) == '{"to":"\\u00e9","n":[1,null]}'
        [job] = client.queue(queue).pop(1)
        assert job.data == {"to": "é", "n": [1, None]}
        job.data = {"changed": True}
        job.complete()
        assert _stored(redis_server, jid) == '{"changed":true}'


def test_data_changed_in_place_is_what_complete_saves(redis_server: RedisServer,
                                                      queue: str) -> None:
    with Client(redis_server.url, db=9) as client:
        kept = client.queue(queue).put("k", {"n": 1}, jid=f"{queue}-kept")
        changed = client.queue(queue).put("k", {"n": 1, "seen": []}, jid=f"{queue}-changed")
        jobs = {job.jid: job for job in client.queue(queue).pop(2)}
        assert jobs[kept].data == {"n": 1}  # read, not changed: the stored text is sent back
        jobs[changed].data["seen"].append("worker")  # changed in place, not reassigned
        for job in jobs.values():
            job.complete()
        assert _stored(redis_server, kept) == '{"n":1}'
        assert json.loads(_stored(redis_server, changed)) == {"n": 1, "seen": ["worker"]}


def test_your_own_type(redis_server: RedisServer, queue: str) -> None:
    with Client(redis_server.url, db=9, serializer=PointJson()) as client:
        jid = client.queue(queue).put("k", Point(1, 2))
        assert json.loads(_stored(redis_server, jid)) == {"x": 1, "y": 2}
        [job] = client.queue(queue).pop(1)
        assert job.data == Point(1, 2)
        job.heartbeat(data=Point(3, 4))
        assert client.get(jid).data == Point(3, 4)  # type: ignore[union-attr]
        job.complete(next=queue, data=Point(5, 6))
        assert client.queue(queue).peek().data == Point(5, 6)  # type: ignore[union-attr]
    with Client(redis_server.url, db=9, serializer=Json(default=asdict)) as client:
        second = client.queue(queue).put("k", {"p": Point(7, 8)})
        # Put in the same millisecond as the first job's move, the two may peek in either order.
        [job] = [j for j in client.queue(queue).peek(2) if j.jid == second]
        assert job.data == {"p": {"x": 7, "y": 8}}


def test_what_is_not_json_is_refused_before_anything_is_sent(
    redis_server: RedisServer, queue: str
) -> None:
    with Client(redis_server.url, db=9) as client:
        with pytest.raises(SerializationError, match="not JSON-serialisable") as info:
            client.queue(queue).put("k", {"nan": float("nan")})
        assert isinstance(info.value, LocalProtocolError)
        with pytest.raises(SerializationError):
            client.queue(queue).put_many([("k", {1}), ("k", 1)])
    with Client(redis_server.url, db=9, serializer=TEXT) as text:
        with pytest.raises(SerializationError, match="qless job data must be JSON text"):
            text.queue(queue).put("k", "plain words are not JSON")
        with pytest.raises(SerializationError, match="qless job data must be JSON text"):
            text.queue(queue).recur("k", "nor are these", interval=timedelta(minutes=1))
        assert text.queue(queue).put("k", '"a JSON string is"')
        assert text.queue(queue).pop(1)[0].data == '"a JSON string is"'
    with Client(redis_server.url, db=9, serializer=PointJson()) as points:
        with pytest.raises(SerializationError) as info:
            points.queue(queue).put("k", "not a point")  # type: ignore[arg-type]
        assert isinstance(info.value.__cause__, TypeError)
        assert points.queue(queue).counts()["waiting"] == 0


def test_data_the_serializer_cannot_read_loses_no_job(
    redis_server: RedisServer, queue: str
) -> None:
    with Client(redis_server.url, db=9) as plain:
        first = plain.queue(queue).put("k", {"x": 1, "y": 2})
        second = plain.queue(queue).put("k", ["not", "a", "point"])
    with Client(redis_server.url, db=9, serializer=PointJson()) as client:
        jobs = {job.jid: job for job in client.queue(queue).pop(2)}  # both popped, no error
        assert jobs[first].data == Point(1, 2)
        with pytest.raises(DeserializationError) as info:
            jobs[second].data  # noqa: B018
        assert info.value.job_id == second
        assert info.value.data == b'["not","a","point"]'
        jobs[second].fail("bad-data", str(info.value))
        jobs[first].complete()  # sends the data as stored, no round trip
        assert _stored(redis_server, first) == '{"x":1,"y":2}'
        assert client.get(second).state == "failed"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_the_async_client(redis_server: RedisServer, queue: str) -> None:
    async with AsyncClient(redis_server.url, db=9, serializer=PointJson()) as client:
        await client.queue(queue).put_many([("k", Point(1, 1)), ("k", Point(2, 2))],
                                           delay=timedelta(seconds=0))
        jobs = await client.queue(queue).pop(2)
        assert sorted(job.data.x for job in jobs) == [1, 2]
        with pytest.raises(SerializationError):
            await client.queue(queue).put("k", object())  # type: ignore[arg-type]
        for job in jobs:
            await job.retry(delay=timedelta(milliseconds=1))
