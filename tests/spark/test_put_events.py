"""The sinks' ``events`` option: each task records a ``put`` event per job it queued, so the
metrics pipeline knows when each job's wait began (docs/events.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from beanstalk_client import Client
from qless_client import Client as QlessClient
from tests.conftest import BeanstalkServer
from tests.qless.conftest import RedisServer

from .conftest import need_spark

need_spark()
pytestmark = pytest.mark.spark


def _events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl"))
            for line in f.read_text().splitlines()]


def test_beanstalk_sink_records_a_put_per_job(
    spark: Any, server: BeanstalkServer, tube: str, tmp_path: Path
) -> None:
    began = time.time()
    df = spark.range(40).selectExpr("cast(id as string) as body").repartition(3)
    df.write.format("beanstalk").option("url", server.url).option("tube", tube) \
        .option("events", str(tmp_path)).mode("append").save()
    events = _events(tmp_path)
    assert len(events) == 40
    assert {(e["event"], e["system"], e["queue"]) for e in events} == {("put", "beanstalk", tube)}
    assert all(began <= e["time"] <= time.time() for e in events)
    with Client(server.url) as client:
        bodies = {client.peek(int(e["job"])).body for e in events}
    assert bodies == {str(i).encode() for i in range(40)}


def test_qless_sink_records_a_put_per_job(
    spark: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    queue = f"q-{tmp_path.name[-12:]}"
    df = spark.range(30).selectExpr("to_json(named_struct('n', id)) as data")
    df.write.format("qless").option("url", redis_server.url).option("queue", queue) \
        .option("klass", "K").option("events", str(tmp_path)).mode("append").save()
    events = _events(tmp_path)
    assert len(events) == 30 and {e["queue"] for e in events} == {queue}
    with QlessClient(redis_server.url) as client:
        jobs = [client.get(e["job"]) for e in events]
    assert sorted(job.data["n"] for job in jobs if job is not None) == list(range(30))
