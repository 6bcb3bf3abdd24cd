"""Job lifecycle events (put, reserved, completed, failed ...) written to rotating files.

    sink = EventSink("/var/log/jobwire-events")           # JSON lines; format="parquet" too
    worker = AsyncWorker("beanstalk://127.0.0.1", tubes=["emails"], events=sink)
    ...
    sink.close()                                          # or: with EventSink(...) as sink:

Every worker of the four packages takes ``events=`` (off by default). The schema is in
``docs/events.md``: one record per event with ``v`` (1), ``event``, ``time`` (UTC epoch
seconds), ``system``, ``queue``, ``job``, ``worker``, ``put_time``, ``group`` and ``attempt``.

Why it is shaped like this:

* **Off the hot path.** :meth:`EventSink.emit` appends a tuple to a bounded deque (no lock);
  encoding and file writes happen in one background thread, in
  batches, every ``flush_interval`` seconds (sooner once the buffer is half full), and on
  :meth:`EventSink.flush` and :meth:`EventSink.close`.
* **Never blocking a worker.** When ``max_buffered`` events wait to be written (a slow or full
  disk), new ones are dropped and counted in :attr:`EventSink.dropped`; a write error is kept in
  :attr:`EventSink.error` (raised by :meth:`EventSink.close`), the events it loses are counted
  as dropped too, and the next batch starts a new file.
* **Files a reader can take.** JSON lines go to ``events-<unix-ms>-<pid>-<seq>.jsonl`` in whole
  lines, flushed per batch, so a file can be read while it grows; a new file is started before
  one would pass ``max_bytes``. A Parquet file is only readable once closed (its footer comes
  last), so it is written as ``.events-....parquet.part`` (a hidden name, which Spark and
  pyarrow skip) and renamed to ``events-....parquet`` when it reaches ``max_bytes`` or the sink
  is closed.
* **Nothing lost at exit.** The writer thread is not a daemon: when the main thread ends it
  writes what is buffered, closes its file and ends, even if ``close()`` was never called.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import socket
import threading
from collections import deque
from json.encoder import encode_basestring as _quote  # json's own (C) string quoting
from pathlib import Path
from time import monotonic as _monotonic
from time import time as _time
from types import TracebackType
from typing import Any, Final, Literal

__all__ = [
    "EVENT_KINDS",
    "FIELDS",
    "SCHEMA_VERSION",
    "SYSTEMS",
    "EventSink",
    "default_worker_id",
    "failure_group",
]

log = logging.getLogger("jobwire.events")

#: The ``v`` of every record.
SCHEMA_VERSION: Final = 1
#: Every ``event`` a record may hold.
EVENT_KINDS: Final = frozenset(
    {"put", "reserved", "completed", "failed", "released", "buried", "retried", "lost"}
)
#: Every ``system`` a record may hold.
SYSTEMS: Final = frozenset({"beanstalk", "gearman", "workq", "qless"})
#: The columns, in the order they are written.
FIELDS: Final = (
    "v", "event", "time", "system", "queue", "job", "worker", "put_time", "group", "attempt",
)

Format = Literal["jsonl", "parquet"]
_Row = tuple[str, float, str, str, str, str, "float | None", "str | None", "int | None"]

#: One sequence for every sink of the process, so two sinks on one directory never pick the
#: same file name (``next`` on an ``itertools.count`` is atomic in CPython).
_SEQ = itertools.count()


def default_worker_id() -> str:
    """``<hostname>-<pid>``: the worker id of events from workers that have no name."""
    return f"{socket.gethostname()}-{os.getpid()}"


def failure_group(error: BaseException) -> str:
    """The failure group of a handler's exception: ``module.QualName`` (just ``QualName`` for a
    builtin, e.g. ``ValueError``). qless workers send it as the job's failure group; every
    worker writes it as the ``group`` of its ``failed`` events."""
    kind = type(error)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


class EventSink:
    """A directory of job lifecycle events, written by a background thread.

    Args:
        directory: where the files go (created if missing).
        format: ``"jsonl"`` (JSON lines, UTF-8) or ``"parquet"`` (needs pyarrow).
        max_bytes: size at which a file is closed and the next one started (64 MiB).
        max_buffered: most events waiting to be written; more are dropped and counted in
            :attr:`dropped`.
        flush_interval: seconds between the writer's batches (it also wakes when the buffer is
            half full).

    Raises:
        ValueError: an unknown format, or a size, count or interval that is not positive.
        TypeError: a size or count that is not an int.
        ImportError: ``format="parquet"`` without pyarrow installed.
        OSError: the directory cannot be created.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        format: Format = "jsonl",
        max_bytes: int = 64 * 1024 * 1024,
        max_buffered: int = 100_000,
        flush_interval: float = 1.0,
    ) -> None:
        if format not in ("jsonl", "parquet"):
            raise ValueError(f"format is 'jsonl' or 'parquet', not {format!r}")
        for name, value in (("max_bytes", max_bytes), ("max_buffered", max_buffered)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} is an int, not {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, not {value}")
        if not flush_interval > 0:
            raise ValueError(f"flush_interval must be > 0, not {flush_interval!r}")
        self.directory = Path(directory)
        self.format: Format = format
        self.max_bytes = max_bytes
        self.max_buffered = max_buffered
        self.flush_interval = float(flush_interval)
        self._files: _JsonlFiles | _ParquetFiles = (
            _ParquetFiles(self.directory, max_bytes) if format == "parquet"
            else _JsonlFiles(self.directory, max_bytes)
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        #: Events dropped: the buffer was full, the sink was closed, or a write failed.
        self.dropped = 0
        #: Events written to files.
        self.written = 0
        #: The first write error, if any (the writer goes on with the next batch).
        self.error: Exception | None = None
        self._buffer: deque[_Row] = deque()
        self._lock = threading.Lock()  # ``dropped`` and ``_closed``
        self._write_lock = threading.Lock()  # one writer at a time: the thread, flush, close
        self._wakeup = threading.Event()
        self._half = max(1, max_buffered // 2)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="jobwire-events", daemon=False)
        self._thread.start()

    def __enter__(self) -> EventSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<EventSink {str(self.directory)!r} {self.format} written={self.written} "
                f"dropped={self.dropped}>")

    @property
    def closed(self) -> bool:
        """True once :meth:`close` began: :meth:`emit` then drops (and counts) events."""
        return self._closed

    # -- the hot path --------------------------------------------------------------------------

    def emit(
        self,
        event: str,
        time: float,
        system: str,
        queue: str,
        job: str,
        worker: str,
        put_time: float | None = None,
        group: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """Buffer one event (the fields are those of ``docs/events.md``); never blocks on I/O.

        When :attr:`max_buffered` events are already waiting, or the sink is closed, the event
        is dropped and counted in :attr:`dropped`. The happy path takes no lock (a deque's
        append is atomic), so threads emitting at the same instant may each add one event past
        the bound; an event emitted while :meth:`close` runs may be written or dropped.

        Raises:
            ValueError: ``event`` is not one of :data:`EVENT_KINDS`.
        """
        if event not in EVENT_KINDS:
            raise ValueError(f"unknown event {event!r}; one of {sorted(EVENT_KINDS)}")
        buffer = self._buffer
        if len(buffer) >= self.max_buffered or self._closed:
            with self._lock:
                self.dropped += 1
            return
        buffer.append((event, time, system, queue, job, worker, put_time, group, attempt))
        if len(buffer) == self._half:
            self._wakeup.set()

    # -- writing -------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write every event buffered so far, in the caller's thread (waits for a batch the
        writer thread is writing). A write error is kept in :attr:`error`, not raised."""
        with self._write_lock:
            self._write_buffered()

    def close(self) -> None:
        """Stop the writer thread, write everything buffered and close the current file (a
        Parquet file gets its final name). Idempotent; events emitted afterwards are dropped.

        Raises:
            Exception: the first error any write of this sink met (:attr:`error`: an
                ``OSError`` such as a full disk, or pyarrow's error for a value of the wrong
                type); the events it lost are counted in :attr:`dropped`.
        """
        if not self._closed:
            with self._lock:
                self._closed = True
            self._wakeup.set()
            self._thread.join()
            self._finish()
        if self.error is not None:
            raise self.error

    def _finish(self) -> None:
        """Write what is left and close the current file (close, or the program's end)."""
        with self._lock:
            self._closed = True
        with self._write_lock:
            self._write_buffered()
            try:
                self._files.close()
            except Exception as exc:  # kept in ``error``, raised by close()
                self._failed(exc, 0)

    def _run(self) -> None:
        main = threading.main_thread()
        due = _monotonic() + self.flush_interval
        while True:
            ending = not main.is_alive()
            if not ending and not self._closed:
                # Wake at least every 0.5 s to notice the end of the program.
                woken = self._wakeup.wait(max(0.0, min(0.5, due - _monotonic())))
                if not woken and _monotonic() < due:
                    continue
            self._wakeup.clear()
            due = _monotonic() + self.flush_interval
            with self._write_lock:
                self._write_buffered()
            if self._closed:
                return  # close() writes the rest
            if ending:  # the program is ending without close(): finish up
                self._finish()
                return

    def _write_buffered(self) -> None:
        """Write what the buffer holds now (under ``_write_lock``)."""
        buffer = self._buffer
        count = len(buffer)
        if not count:
            return
        rows = [buffer.popleft() for _ in range(count)]
        try:
            self._files.write(rows)
        except Exception as exc:  # the writer thread must survive it
            self._failed(exc, count)
            return
        self.written += count

    def _failed(self, exc: Exception, lost: int) -> None:
        if self.error is None:
            self.error = exc
            log.error("event sink %s: writing failed (%r); %d event(s) lost", self.directory,
                      exc, lost)
        with self._lock:
            self.dropped += lost
        self._files.abandon()


def _file_name(suffix: str) -> str:
    return f"events-{int(_time() * 1000)}-{os.getpid()}-{next(_SEQ)}.{suffix}"


def _record(row: _Row) -> dict[str, Any]:
    event, time, system, queue, job, worker, put_time, group, attempt = row
    return {
        "v": SCHEMA_VERSION, "event": event, "time": time, "system": system, "queue": queue,
        "job": job, "worker": worker, "put_time": put_time, "group": group, "attempt": attempt,
    }


_LINE = ('{"v":%d,"event":%s,"time":%s,"system":%s,"queue":%s,"job":%s,"worker":%s,'
         '"put_time":%s,"group":%s,"attempt":%s}\n')


def _json_line(row: _Row) -> str:
    """One record as a JSON line: the fields of the schema, in order (the fast path, for the
    types the schema names; anything else goes through ``json.dumps``)."""
    event, time, system, queue, job, worker, put_time, group, attempt = row
    try:
        if not (type(time) is float and (put_time is None or type(put_time) is float)
                and (attempt is None or type(attempt) is int)):
            raise TypeError
        return _LINE % (
            SCHEMA_VERSION, _quote(event), repr(time), _quote(system), _quote(queue),
            _quote(job), _quote(worker), "null" if put_time is None else repr(put_time),
            "null" if group is None else _quote(group),
            "null" if attempt is None else str(attempt),
        )
    except TypeError:
        return json.dumps(_record(row), ensure_ascii=False, separators=(",", ":")) + "\n"


class _JsonlFiles:
    """JSON lines in files of at most ``max_bytes`` (unless one line alone is longer)."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._file: Any = None
        self._size = 0

    def write(self, rows: list[_Row]) -> None:
        chunk: list[bytes] = []
        for row in rows:
            line = _json_line(row).encode("utf-8", "replace")
            if self._file is not None and self._size + len(line) > self.max_bytes:
                self._file.write(b"".join(chunk))
                chunk.clear()
                self.close()
            if self._file is None:
                self._open()
            chunk.append(line)
            self._size += len(line)
        if chunk:
            self._file.write(b"".join(chunk))
            self._file.flush()

    def _open(self) -> None:
        while True:
            try:
                self._file = open(self.directory / _file_name("jsonl"), "xb")  # noqa: SIM115
                break
            except FileExistsError:
                continue
        self._size = 0

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def abandon(self) -> None:
        """After a write error: drop the current file (the next write starts a new one)."""
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()


class _ParquetFiles:
    """Parquet files written under a hidden name and renamed once they reach ``max_bytes``."""

    #: Rows per row group at most, so a file passes ``max_bytes`` by one group at most.
    GROUP_ROWS = 10_000

    def __init__(self, directory: Path, max_bytes: int) -> None:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(
                f"EventSink(format='parquet') needs pyarrow (pip install pyarrow): {exc}"
            ) from exc
        self._pa = pa
        self._pq = pq
        self.schema = pa.schema([
            ("v", pa.int64()), ("event", pa.string()), ("time", pa.float64()),
            ("system", pa.string()), ("queue", pa.string()), ("job", pa.string()),
            ("worker", pa.string()), ("put_time", pa.float64()), ("group", pa.string()),
            ("attempt", pa.int64()),
        ])
        self.directory = directory
        self.max_bytes = max_bytes
        self._writer: Any = None
        self._part: Path | None = None

    def write(self, rows: list[_Row]) -> None:
        for start in range(0, len(rows), self.GROUP_ROWS):
            group = rows[start:start + self.GROUP_ROWS]
            columns = list(zip(*group, strict=True))
            arrays = [self._pa.array([SCHEMA_VERSION] * len(group), self._pa.int64())]
            arrays += [self._pa.array(list(values), type=field.type)
                       for values, field in zip(columns, list(self.schema)[1:], strict=True)]
            if self._writer is None:
                self._open()
            self._writer.write_table(self._pa.Table.from_arrays(arrays, schema=self.schema))
            assert self._part is not None
            if self._part.stat().st_size >= self.max_bytes:
                self.close()

    def _open(self) -> None:
        name = _file_name("parquet")
        self._part = self.directory / f".{name}.part"
        self._writer = self._pq.ParquetWriter(str(self._part), self.schema)

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is None or self._part is None:
            return
        writer.close()
        part, self._part = self._part, None
        part.rename(part.with_name(part.name[1:-len(".part")]))

    def abandon(self) -> None:
        """After a write error: drop the current file (the next write starts a new one)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):  # already failing; the file stays a .part
                writer.close()
        self._part = None
