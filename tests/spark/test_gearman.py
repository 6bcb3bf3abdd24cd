"""The gearman format against the bundled server and the real gearmand: the background sink,
the admin tables, and gearman_call (foreground jobs as a column)."""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from gearman_client import Admin
from gearman_client import Worker as GearmanWorker
from gearman_client import _packets as pk
from tests.gearman.conftest import GearmanServer

from ..waiting import wait_until
from .conftest import need_spark

need_spark()
pytestmark = pytest.mark.spark


@contextmanager
def worker(server: GearmanServer, function: str, handle: Callable[[Any], Any],
           concurrency: int = 4) -> Iterator[GearmanWorker]:
    """A jobwire Gearman worker for ``function`` running in a thread."""
    w = GearmanWorker(server.url, concurrency=concurrency, client_id="spark-test")
    w.register(function, handle)
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        yield w
    finally:
        w.stop()
        thread.join(10)


def queued(server: GearmanServer, function: str) -> int:
    with Admin(server.url) as admin:
        return sum(s.queued for s in admin.status() if s.function == function)


def drain(server: GearmanServer, function: str, n: int, concurrency: int = 8) -> list[bytes]:
    """Run the ``n`` queued jobs of ``function``; return their data in the order they ran."""
    seen: list[bytes] = []
    lock = threading.Lock()

    def handle(job: Any) -> bytes:
        with lock:
            seen.append(job.data)
        return b""

    with worker(server, function, handle, concurrency):
        wait_until(lambda: len(seen) >= n and queued(server, function) == 0, 60,
                   f"{n} jobs run")
    return seen


def drain_pipelined(server: GearmanServer, function: str, n: int) -> list[bytes]:
    """Take ``n`` queued jobs of ``function`` as a worker would, fast: GRAB_JOBs and their
    WORK_COMPLETEs pipelined 512 at a time on a raw socket. Returns the jobs' data."""
    seen: list[bytes] = []
    decoder = pk.PacketDecoder(pk.RES)
    grab = pk.encode_packet(pk.GrabJob(), pk.REQ)
    with socket.create_connection(server.address, timeout=30) as sock:
        sock.sendall(pk.encode_packet(pk.CanDo(function.encode()), pk.REQ))
        while len(seen) < n:
            batch = min(512, n - len(seen))
            sock.sendall(grab * batch)
            replies: list[pk.Packet] = []
            while len(replies) < batch:
                while len(replies) < batch and (packet := decoder.next_packet()) is not None:
                    if not isinstance(packet, pk.Noop):
                        replies.append(packet)
                if len(replies) < batch:
                    data = sock.recv(1 << 20)
                    assert data, "the server closed the connection"
                    decoder.feed(data)
            assigned = [r for r in replies if isinstance(r, pk.JobAssign)]
            assert assigned, f"no job left after {len(seen)} of {n}"
            seen.extend(job.data for job in assigned)
            sock.sendall(b"".join(pk.encode_packet(pk.WorkComplete(job.handle, b""), pk.REQ)
                                  for job in assigned))
        # The server answers one connection in order: once the echo is back, every
        # WORK_COMPLETE before it was handled (a server may serve other connections meanwhile).
        sock.sendall(pk.encode_packet(pk.EchoReq(b"done"), pk.REQ))
        while not isinstance(packet := decoder.next_packet(), pk.EchoRes):
            if packet is None:
                data = sock.recv(1 << 20)
                assert data, "the server closed the connection"
                decoder.feed(data)
    return seen


def write(df: Any, server: GearmanServer, **options: str) -> None:
    writer = df.write.format("gearman").option("url", server.url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


@pytest.mark.slow
def test_write_lands_exactly_the_rows_written(
    spark: Any, gearman_server: GearmanServer, function: str
) -> None:
    n = 100_000
    df = spark.range(n).selectExpr("cast(cast(id as string) as binary) as data").repartition(2)
    write(df, gearman_server, function=function)
    assert queued(gearman_server, function) == n
    got = drain_pipelined(gearman_server, function, n)
    assert queued(gearman_server, function) == 0
    assert Counter(got) == Counter(str(i).encode() for i in range(n))


def test_unique_coalesces_and_priority_orders(
    spark: Any, gearman_server: GearmanServer, function: str
) -> None:
    rows = [("n1", None, "normal"), ("u", "same", None), ("u", "same", None),
            ("h1", None, "HIGH"), ("l1", None, "low")]
    df = spark.createDataFrame(rows, "data string, unique string, priority string")
    write(df.coalesce(1), gearman_server, function=function)
    assert queued(gearman_server, function) == 4  # the two rows with one unique: one job
    assert drain(gearman_server, function, 4, concurrency=1) == [b"h1", b"n1", b"u", b"l1"]


@pytest.mark.parametrize(
    ("rows", "column", "reason"),
    [
        ([("a", "u1"), ("b", "u2"), ("c", "x" * 64)], "unique", "at most 63"),
        ([("a", None), ("b", None), (None, None)], "data", "is null"),
    ],
    ids=["unique-too-long", "missing-data"],
)
def test_bad_row_fails_the_task_naming_it(
    spark: Any, gearman_server: GearmanServer, function: str, rows: list[Any], column: str,
    reason: str,
) -> None:
    df = spark.createDataFrame(rows, "data string, unique string").coalesce(1)
    with pytest.raises(Exception) as info:
        write(df, gearman_server, function=function)
    assert f"BadRow: row 2 of partition 0, column '{column}'" in str(info.value)
    assert reason in str(info.value)
    assert queued(gearman_server, function) == 0  # nothing of the row's chunk was sent


def test_function_column_without_option_and_a_null_is_named(
    spark: Any, gearman_server: GearmanServer, function: str
) -> None:
    df = spark.createDataFrame([("a", function), ("b", None)], "data string, function string")
    with pytest.raises(Exception) as info:
        write(df.coalesce(1), gearman_server)
    assert "BadRow: row 1 of partition 0, column 'function'" in str(info.value)
    assert queued(gearman_server, function) == 0  # checked before the chunk was sent


def test_missing_function_fails_on_the_driver(spark: Any, gearman_server: GearmanServer) -> None:
    df = spark.createDataFrame([("a",)], "data string")
    with pytest.raises(Exception, match="BadOption") as info:
        write(df, gearman_server)
    assert "option 'function': is required" in str(info.value)


def test_tables_match_the_servers_own_answers(
    spark: Any, gearman_server: GearmanServer, function: str
) -> None:
    df = spark.createDataFrame([("a",), ("b",)], "data string")
    write(df, gearman_server, function=function)
    other = f"{function}-w"
    with worker(gearman_server, other, lambda job: b""):
        def table(name: str) -> list[Any]:
            return list(spark.read.format("gearman").option("url", gearman_server.url)
                        .option("table", name).load().collect())

        wait_until(lambda: any(other in w.functions for w in Admin(gearman_server.url)
                               .workers()), 10, "the worker registered")
        status, workers = table("status"), table("workers")
        with Admin(gearman_server.url) as admin:
            own_status, own_workers = admin.status(), admin.workers()
    assert {(r["function"], r["queued"], r["running"], r["workers"]) for r in status} == {
        (s.function, s.queued, s.running, s.workers) for s in own_status}
    assert (function, 2, 0, 0) in {(r["function"], r["queued"], r["running"], r["workers"])
                                   for r in status}
    assert {r["server"] for r in status} == {f"{gearman_server.host}:{gearman_server.port}"}
    ours = [r for r in workers if other in r["functions"]]
    assert [(r["client_id"], r["functions"]) for r in ours] == [
        (w.client_id, list(w.functions)) for w in own_workers if other in w.functions]
    assert ours[0]["client_id"] == "spark-test"


def test_gearman_call_puts_results_and_per_row_errors_in_columns(
    spark: Any, gearman_server: GearmanServer, function: str
) -> None:
    from jobwire.spark import gearman_call

    def handle(job: Any) -> bytes:
        if job.data == b"boom":
            raise ValueError("no boom")
        return bytes(job.data.upper())

    inputs = [f"v{i}" for i in range(200)] + ["boom", None]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(inputs)], "n int, v string")
    with worker(gearman_server, function, handle, concurrency=8):
        rows = gearman_call(df.repartition(2), function, "v", url=gearman_server.url,
                            timeout=30).collect()
    by_n = {r["n"]: r for r in rows}
    assert len(by_n) == len(inputs)
    for i in range(200):
        assert (by_n[i]["result"], by_n[i]["error"]) == (f"V{i}".encode(), None)
    boom = by_n[200]
    # jobwire's worker reports a handler's exception as WORK_WARNING + WORK_FAIL
    assert boom["result"] is None and boom["error"].startswith("JobFailed")
    assert "no boom" in boom["error"]
    assert (by_n[201]["result"], by_n[201]["error"]) == (None, "input is null")
