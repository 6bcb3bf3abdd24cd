"""A qless worker reads and writes job data through the serializer of the client it was given,
with or without an event sink, and completes a job with the data as stored when its handler
never read it (so data the serializer cannot read, or JSON another binding wrote in its own
spelling, goes back untouched). Against a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from jobwire.events import EventSink
from jobwire.serializers import TEXT
from qless_client import AsyncClient, AsyncJob, Client
from qless_client._redis import Redis
from qless_client.worker import AsyncWorker
from tests.qless.conftest import RedisServer

pytestmark = pytest.mark.anyio

DB = 13


@dataclass
class Point:
    x: int
    y: int


class PointSerializer:
    """Job data as a :class:`Point`, stored as ``{"x": .., "y": ..}``."""

    def dumps(self, value: Point, /) -> bytes:
        return json.dumps({"x": value.x, "y": value.y}).encode()

    def loads(self, data: bytes, /) -> Point:
        value = json.loads(data)
        return Point(value["x"], value["y"])

    def __repr__(self) -> str:
        return "POINT"


class Unreadable:
    """Writes JSON, reads nothing: every job's data raises DeserializationError when read."""

    def dumps(self, value: Any, /) -> bytes:
        return json.dumps(value).encode()

    def loads(self, data: bytes, /) -> Any:
        raise ValueError("this serializer reads nothing")


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    with Redis.from_url(f"{redis_server.url}/{DB}") as r:
        r.execute("FLUSHDB")
    yield f"{redis_server.url}/{DB}"


async def _work_one(worker: AsyncWorker, handler: Any) -> None:
    """Run ``worker`` until its handler has run once and the job is settled."""
    ran = anyio.Event()

    async def once(job: AsyncJob[Any]) -> object:
        try:
            return await handler(job)
        finally:
            ran.set()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, once)
            await ran.wait()
            worker.stop()  # run returns once the job is reported


@pytest.mark.parametrize("with_events", [False, True], ids=["plain", "events"])
async def test_the_handler_reads_and_saves_data_through_the_clients_serializer(
    url: str, tmp_path: Path, with_events: bool
) -> None:
    with Client(url) as other:
        jid = other.queue("points").put("K", {"x": 1, "y": 2})
    seen: list[object] = []

    async def handler(job: AsyncJob[Point]) -> None:
        seen.append(job.data)
        job.data.x += 10  # changed in place: saved with the complete

    sink = EventSink(tmp_path) if with_events else None
    try:
        worker = AsyncWorker(AsyncClient(url, serializer=PointSerializer()), queues=["points"],
                             events=sink)
        await _work_one(worker, handler)
    finally:
        if sink is not None:
            sink.close()
    assert seen == [Point(11, 2)]
    with Client(url) as other:
        job = other.get(jid)
        assert job is not None and (job.state, job.data) == ("complete", {"x": 11, "y": 2})
    assert (worker.stats.completed, worker.stats.failed) == (1, 0)


async def test_data_never_read_goes_back_as_stored(url: str) -> None:
    # Valid JSON in another binding's spelling: json.dumps would write it back differently.
    stored = '{"b": 1.50, "a": "\\u00e9"}'
    unreadable = '{"x": 1}'
    with Client(url, serializer=TEXT) as other:
        jids = [other.queue("kept-1").put("K", stored),
                other.queue("kept-2").put("K", unreadable)]

    async def handler(job: AsyncJob[Any]) -> None:
        pass  # never reads job.data

    clients = [AsyncClient(url), AsyncClient(url, serializer=Unreadable())]
    for queue, client in zip(["kept-1", "kept-2"], clients, strict=True):
        worker = AsyncWorker(client, queues=[queue])
        await _work_one(worker, handler)
        assert (worker.stats.completed, worker.stats.failed) == (1, 0)
        await client.aclose()
    with Client(url, serializer=TEXT) as other:
        done = [other.get(jid) for jid in jids]
        # Sent unread, and stored as sent (jobwire's script keeps the text; qless-core's
        # would write it again in cjson's spelling)
        assert [(j.state, j.data) for j in done if j is not None] == [
            ("complete", stored), ("complete", unreadable)
        ]
