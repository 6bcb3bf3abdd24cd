"""The event sink (jobwire.events): files and their rotation by size, the bounded buffer, the
Parquet form, flushing on close and at the end of the program, and emitters in many threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jobwire.events import FIELDS, EventSink, failure_group
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


def read_jsonl(directory: Path) -> list[dict[str, Any]]:
    """Every record of the directory's JSON lines files, file by file in name order."""
    out: list[dict[str, Any]] = []
    for path in sorted(directory.glob("events-*.jsonl")):
        with path.open(encoding="utf-8") as f:
            out.extend(json.loads(line) for line in f)
    return out


def emit_n(sink: EventSink, n: int, *, start: int = 0, worker: str = "w") -> None:
    for i in range(start, start + n):
        sink.emit("reserved", 1_700_000_000.0 + i / 1000, "beanstalk", "emails", str(i), worker,
                  put_time=1_700_000_000.0, attempt=1)


def test_a_record_has_every_field_in_order(tmp_path: Path) -> None:
    with EventSink(tmp_path) as sink:
        sink.emit("failed", 1_700_000_123.456, "qless", "q1", "jid1", "host-1", group="ValueError",
                  attempt=3)
        sink.emit("reserved", 1_700_000_000.25, "gearman", "fn", "H:vm:1", "host-1",
                  put_time=None)
    [path] = tmp_path.glob("events-*.jsonl")
    name = path.name.split("-")
    assert name[0] == "events" and name[2] == str(os.getpid()) and name[3].endswith(".jsonl")
    assert abs(int(name[1]) / 1000 - time.time()) < 60
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    assert list(first) == list(FIELDS)
    assert first == {"v": 1, "event": "failed", "time": 1_700_000_123.456, "system": "qless",
                     "queue": "q1", "job": "jid1", "worker": "host-1", "put_time": None,
                     "group": "ValueError", "attempt": 3}
    assert json.loads(lines[1])["time"] == 1_700_000_000.25
    assert (sink.written, sink.dropped) == (2, 0)


def test_files_rotate_by_size(tmp_path: Path) -> None:
    with EventSink(tmp_path, max_bytes=1000) as sink:
        emit_n(sink, 200)
        sink.flush()
        emit_n(sink, 100, start=200)
    files = sorted(tmp_path.glob("events-*.jsonl"))
    assert len(files) > 10
    for path in files:
        size = path.stat().st_size
        assert 0 < size <= 1000
        assert path.read_bytes().endswith(b"\n")  # whole lines only
    records = read_jsonl(tmp_path)
    assert sorted(int(r["job"]) for r in records) == list(range(300))
    assert len({p.name for p in files}) == len(files)


def test_a_full_buffer_drops_new_events_and_counts_them(tmp_path: Path) -> None:
    sink = EventSink(tmp_path, max_buffered=10, flush_interval=3600)
    with sink._write_lock:  # the writer is busy (a slow disk): nothing leaves the buffer
        emit_n(sink, 25)  # returns although the writer is held: it never waits for the writer
        assert sink.dropped == 15
    sink.close()
    assert [int(r["job"]) for r in read_jsonl(tmp_path)] == list(range(10))  # the first 10
    assert (sink.written, sink.dropped) == (10, 15)


def test_close_writes_everything_and_later_events_are_dropped(tmp_path: Path) -> None:
    sink = EventSink(tmp_path, flush_interval=3600)
    emit_n(sink, 1000)
    assert not list(tmp_path.glob("events-*"))  # nothing written yet: the writer waits
    sink.close()
    assert len(read_jsonl(tmp_path)) == 1000
    assert sink.closed and not sink._thread.is_alive()
    emit_n(sink, 3)
    assert (sink.written, sink.dropped) == (1000, 3)
    sink.close()  # idempotent


def test_the_writer_flushes_by_itself(tmp_path: Path) -> None:
    with EventSink(tmp_path, flush_interval=0.05) as sink:
        emit_n(sink, 5)
        wait_until(lambda: len(read_jsonl(tmp_path)) >= 5, 5, "the writer to write the batch")
        assert sink.written == 5


def test_a_half_full_buffer_wakes_the_writer(tmp_path: Path) -> None:
    with EventSink(tmp_path, max_buffered=100, flush_interval=3600) as sink:
        emit_n(sink, 50)
        wait_until(lambda: sink.written >= 50, 5, "the writer to be woken")


def test_many_threads(tmp_path: Path) -> None:
    threads, per_thread = 8, 5000
    sink = EventSink(tmp_path, max_bytes=64 * 1024, max_buffered=2000, flush_interval=0.01)
    barrier = threading.Barrier(threads)

    def emitter(k: int) -> None:
        barrier.wait()
        emit_n(sink, per_thread, start=k * per_thread, worker=f"w{k}")

    workers = [threading.Thread(target=emitter, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    sink.close()
    records = read_jsonl(tmp_path)
    jobs = [int(r["job"]) for r in records]
    assert len(jobs) == len(set(jobs)) == sink.written  # every line whole, none twice
    assert sink.written + sink.dropped == threads * per_thread
    for k in range(threads):  # each thread's events keep their order
        mine = [j for j, r in zip(jobs, records, strict=True) if r["worker"] == f"w{k}"]
        assert mine == sorted(mine)


def test_parquet(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    with EventSink(tmp_path, format="parquet", max_bytes=4096) as sink:
        for batch in range(6):
            emit_n(sink, 100, start=batch * 100)
            sink.flush()
            assert not list(tmp_path.glob("events-*.jsonl"))
        sink.emit("failed", 1_700_000_999.5, "qless", "q", "x", "w", group="Boom", attempt=2)
    assert not list(tmp_path.glob(".*.part"))  # every file got its final name
    files = sorted(tmp_path.glob("events-*.parquet"))
    assert len(files) > 1  # rotated
    table = pq.ParquetDataset([str(f) for f in files]).read()
    assert table.column_names == list(FIELDS)
    rows = table.to_pylist()
    assert len(rows) == 601
    assert sorted(int(r["job"]) for r in rows[:-1] if r["job"] != "x") == list(range(600))
    last = next(r for r in rows if r["job"] == "x")
    assert last == {"v": 1, "event": "failed", "time": 1_700_000_999.5, "system": "qless",
                    "queue": "q", "job": "x", "worker": "w", "put_time": None,
                    "group": "Boom", "attempt": 2}
    first = next(r for r in rows if r["job"] == "0")
    assert first["put_time"] == 1_700_000_000.0 and first["group"] is None


def test_an_open_parquet_file_is_hidden_until_closed(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    sink = EventSink(tmp_path, format="parquet")
    emit_n(sink, 10)
    sink.flush()
    assert len(list(tmp_path.glob(".events-*.parquet.part"))) == 1
    assert not list(tmp_path.glob("events-*"))
    sink.close()
    assert len(list(tmp_path.glob("events-*.parquet"))) == 1
    assert not list(tmp_path.glob(".*"))


def test_parquet_without_pyarrow_fails_at_construction(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        sys.modules["pyarrow"] = None  # as if it were not installed
        from jobwire.events import EventSink
        try:
            EventSink({str(tmp_path)!r}, format="parquet")
        except ImportError as exc:
            print("ImportError:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert "ImportError: EventSink(format='parquet') needs pyarrow" in out.stdout, out.stderr


def test_a_program_that_forgets_close_loses_nothing(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        from jobwire.events import EventSink
        sink = EventSink({str(tmp_path)!r}, flush_interval=3600)
        for i in range(100):
            sink.emit("completed", 1.0 + i, "workq", "q", str(i), "w")
    """)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
    assert [r["job"] for r in read_jsonl(tmp_path)] == [str(i) for i in range(100)]


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="format"):
        EventSink(tmp_path, format="csv")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_bytes"):
        EventSink(tmp_path, max_bytes=0)
    with pytest.raises(TypeError, match="max_buffered"):
        EventSink(tmp_path, max_buffered=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="flush_interval"):
        EventSink(tmp_path, flush_interval=0)
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        EventSink(tmp_path / "file")
    with EventSink(tmp_path / "ok") as sink, pytest.raises(ValueError, match="unknown event"):
        sink.emit("done", 1.0, "qless", "q", "j", "w")
    assert not list((tmp_path / "ok").iterdir())


def test_a_write_error_is_kept_and_raised_by_close(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    sink = EventSink(tmp_path, format="parquet", flush_interval=3600)
    sink.emit("reserved", 1.0, "qless", "q", 42, "w")  # type: ignore[arg-type]  # job not a str
    sink.flush()
    assert sink.error is not None and sink.dropped == 1
    emit_n(sink, 3)  # the writer goes on with the next batch
    with pytest.raises(type(sink.error)):
        sink.close()
    assert sink.written == 3


def test_failure_group() -> None:
    class Boom(Exception):
        pass

    assert failure_group(ValueError("x")) == "ValueError"
    assert failure_group(json.JSONDecodeError("x", "", 0)) == "json.decoder.JSONDecodeError"
    assert failure_group(Boom()).endswith("test_failure_group.<locals>.Boom")
