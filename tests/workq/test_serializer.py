"""``serializer=`` on the Workq clients, against the bundled server (the real one is not packaged
here): payloads, results and errors as ``str`` and JSON, a value the serializer cannot
write refused at the call with nothing sent, and one it cannot read reported with the job's id
so the job can still be failed."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import anyio
import pytest

from jobwire.serializers import JSON, TEXT, DeserializationError, SerializationError, Text
from workq_client import AsyncClient, Client, NotFound

from .conftest import WorkqServer


def test_str_payloads_results_and_errors(workq_server: WorkqServer, qname: str) -> None:
    with Client(workq_server.url, serializer=TEXT) as client:
        job_id = client.add(qname, "héllo")
        job = client.lease(qname, wait=5)
        assert (job.job_id, job.payload) == (job_id, "héllo")
        client.complete(job.job_id, "dönë")
        record = client.result(job_id, wait=5)
        assert (record.success, record.data) == (True, "dönë")
        failed = client.add(qname, "x")
        client.fail(client.lease(qname, wait=5).job_id, "it broke: ü")
        assert client.result(failed).data == "it broke: ü"
        empty = client.add(qname, "y")
        client.complete(client.lease(qname, wait=5).job_id)  # None: an empty result
        assert client.result(empty).data == ""
    with Client(workq_server.url) as raw:  # on the wire: UTF-8
        assert raw.result(job_id).data == "dönë".encode()


def test_json_and_scheduling_at_a_unix_time(workq_server: WorkqServer, qname: str) -> None:
    with Client(workq_server.url, serializer=JSON) as client:
        ids = client.add_many(qname, [{"n": 1}, [2], "three", None])
        leased = [client.lease(qname, wait=5) for _ in ids]
        assert [job.payload for job in leased] == [{"n": 1}, [2], "three", None]
        for job in leased:
            client.complete(job.job_id, {"done": job.payload})
        assert client.result(ids[1]).data == {"done": [2]}
        soon = client.schedule(qname, {"later": True}, time.time() + 1)
        info = client.inspect_job(soon)
        assert info.payload == b'{"later":true}'  # inspect shows the bytes the server holds
        assert info.time is not None and info.time > datetime.now(timezone.utc)
        assert client.lease(qname, wait=5).payload == {"later": True}


def test_what_the_serializer_cannot_write_is_refused_before_anything_is_sent(
    workq_server: WorkqServer, qname: str
) -> None:
    with Client(workq_server.url) as raw:
        with pytest.raises(SerializationError, match="pass serializer=TEXT"):
            raw.add(qname, "a str to a bytes client")  # type: ignore[arg-type]
        with pytest.raises(SerializationError, match="payload 2 cannot"):
            raw.add_many(qname, [b"a", b"b", None])  # type: ignore[list-item]
        with pytest.raises(SerializationError):
            raw.run(qname, "x", wait=1)  # type: ignore[arg-type]
    with Client(workq_server.url, serializer=Text("ascii")) as client:
        with pytest.raises(SerializationError, match="'ascii' codec can't encode"):
            client.schedule(qname, "é", datetime.now(timezone.utc))
        with pytest.raises(NotFound):
            client.inspect_queue(qname)  # no add ever reached the server
        job_id = client.add(qname, "ok")
        with pytest.raises(SerializationError):
            client.complete(client.lease(qname, wait=5).job_id, "ü")
        client.complete(job_id, "fine")  # the lease is still held: nothing was sent


def test_a_payload_the_serializer_cannot_read_names_the_job(
    workq_server: WorkqServer, qname: str
) -> None:
    with Client(workq_server.url) as raw, Client(workq_server.url, serializer=JSON) as client:
        job_id = raw.add(qname, b"not json")
        with pytest.raises(DeserializationError) as info:
            client.lease(qname, wait=5)
        assert (info.value.job_id, info.value.data) == (job_id, b"not json")
        client.fail(info.value.job_id, {"error": "unreadable payload"})
        assert client.result(job_id).data == {"error": "unreadable payload"}
        other = raw.add(qname, b"x")
        raw.complete(raw.lease(qname, wait=5).job_id, b"\xff raw result")
        with pytest.raises(DeserializationError) as info:
            client.result(other)
        assert info.value.job_id == other


@pytest.mark.anyio
async def test_the_async_client_runs_a_job(workq_server: WorkqServer, qname: str) -> None:
    async with AsyncClient(workq_server.url, serializer=TEXT) as caller, \
            AsyncClient(workq_server.url, serializer=TEXT) as worker:
        outcome: list[object] = []

        async def run() -> None:
            outcome.append(await caller.run(qname, "ping", wait=10))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            job = await worker.lease(qname, wait=10)
            assert job.payload == "ping"
            await worker.complete(job.job_id, job.payload.upper())
        [record] = outcome
        assert record.data == "PING"  # type: ignore[attr-defined]
        with pytest.raises(SerializationError):
            await caller.add(qname, b"bytes")  # type: ignore[arg-type]
