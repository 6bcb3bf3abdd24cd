"""What every queue format shares: options, errors, the sink's row loop and commit report, the
stream reader that holds jobs until Spark commits, and the request/reply runner.

Everything here runs where Spark puts it: a ``DataSource`` is pickled with its parsed options
and sent to the executors, which open their own connections; only the stream readers (in
Spark's stream-source process) and ``commit``/``abort`` run on the driver.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import anyio
import anyio.from_thread
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from typing_extensions import Self

from jobwire.errors import JobwireError, LocalProtocolError
from jobwire.events import EventSink, default_worker_id

__all__ = [
    "BODY_COLUMNS",
    "BadOption",
    "BadRow",
    "Caller",
    "Column",
    "HeldJobsReader",
    "Options",
    "QueueWriter",
    "Row",
    "RowRefused",
    "WriteReport",
    "call_column",
    "describe",
    "int_in",
    "logger",
    "seconds_value",
    "struct_of",
]

logger = logging.getLogger("jobwire.spark")

#: The names a job's body may have in a written DataFrame (exactly one must be present).
BODY_COLUMNS = ("body", "data", "payload")
#: Rows validated, then sent, per bulk call of a sink (bounds memory; the window bounds flight).
CHUNK_ROWS = 8192
#: Ids each task puts in its commit message by default (``reportIds``).
DEFAULT_REPORT_IDS = 1000

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_NUMERIC = (*_INTEGRAL, FloatType, DoubleType, DecimalType)


class BadOption(LocalProtocolError):
    """An option, the mode, or the DataFrame's columns do not fit the format. Raised on the
    driver when the query is planned, before any task runs or anything is sent."""


class BadRow(LocalProtocolError):
    """A row that cannot become a job (missing body, oversized body, invalid name, a number
    out of range). The task fails with it. Rows are checked a chunk (qless: a window) at a
    time before any of it is sent: the chunks before the row's were sent and every reply read,
    nothing of its chunk and after it was sent.

    Attributes:
        partition: the Spark partition (task) the row was in.
        row: the row's position in that partition, from 0.
        column: the column at fault.
    """

    def __init__(self, partition: int, row: int, column: str, reason: str) -> None:
        super().__init__(f"row {row} of partition {partition}, column {column!r}: {reason}")
        self.partition = partition
        self.row = row
        self.column = column


class RowRefused(JobwireError):
    """The server refused a row's job (beanstalk JOB_TOO_BIG or DRAINING, Gearman QUEUE_ERROR,
    Workq ``Duplicate job`` ...). The task fails with it once every reply of the chunk it was
    in was read; the cause is the protocol's own error (``__cause__``).

    Attributes:
        partition, row: where the row was (as for :class:`BadRow`).
    """

    def __init__(self, partition: int, row: int, error: BaseException) -> None:
        super().__init__(
            f"row {row} of partition {partition}: the server refused it: "
            f"{type(error).__name__}: {error}"
        )
        self.partition = partition
        self.row = row


def describe(exc: BaseException) -> str:
    """An error as the error column of a request/reply call shows it."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- options -------------------------------------------------------------------------------------


#: Every option name each format takes (reads, writes and streams together), as docs/spark.md
#: lists them. :class:`Options` refuses any other name, so that a misspelt option fails instead
#: of leaving its default in place.
KNOWN_OPTIONS: dict[str, tuple[str, ...]] = {
    "beanstalk": ("url", "tube", "priority", "delay", "ttr", "window", "timeout", "reportIds",
                  "events", "table", "maxJobsPerBatch", "checkpointLocation"),
    "gearman": ("url", "function", "priority", "window", "timeout", "reportIds", "events",
                "table"),
    "workq": ("url", "name", "ttr", "ttl", "priority", "maxAttempts", "window", "timeout",
              "reportIds", "onDuplicate", "events", "table", "maxJobsPerBatch",
              "checkpointLocation"),
    "qless": ("url", "queue", "klass", "priority", "retries", "delay", "tags", "window",
              "timeout", "reportIds", "events", "worker", "table", "state", "group",
              "maxJobsPerBatch", "checkpointLocation"),
}


class Options:
    """A format's options (Spark hands them over as strings, names case-insensitive), read with
    types; every mistake is a :class:`BadOption` that names the format and the option.

    Raises:
        BadOption: (at construction) a name the format does not know (:data:`KNOWN_OPTIONS`),
            with the list of the names it knows.
    """

    def __init__(self, fmt: str, options: Mapping[str, str]) -> None:
        self.fmt = fmt
        self._values = {k.lower(): v for k, v in options.items() if v is not None}
        known = KNOWN_OPTIONS.get(fmt)
        if known is not None:
            names = {name.lower() for name in known}
            unknown = sorted(k for k in options if k.lower() not in names)
            if unknown:
                raise BadOption(
                    f"format {fmt!r}: unknown option {', '.join(map(repr, unknown))}; "
                    f"the options of {fmt!r} are {', '.join(known)} (docs/spark.md)"
                )

    def identity(self) -> str:
        """A short digest of every option and its value: tells two sources of one query apart
        (it shows no value, so no password)."""
        text = repr(sorted(self._values.items()))
        return f"{self.fmt}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"

    def error(self, name: str, reason: str) -> BadOption:
        return BadOption(f"format {self.fmt!r}, option {name!r}: {reason}")

    def has(self, name: str) -> bool:
        return name.lower() in self._values

    def text(self, name: str, default: str | None = None) -> str:
        value = self._values.get(name.lower(), default)
        if value is None:
            raise self.error(name, "is required")
        return value

    def optional(self, name: str) -> str | None:
        return self._values.get(name.lower())

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        raw = self._values.get(name.lower())
        if raw is None:
            return default
        try:
            value = int(raw.strip())
        except ValueError:
            raise self.error(name, f"must be an integer, got {raw!r}") from None
        if not low <= value <= high:
            raise self.error(name, f"must be {low}..{high}, got {value}")
        return value

    def seconds(self, name: str, default: float | None) -> float | None:
        """Seconds (``"none"`` for no limit where ``default`` may be None)."""
        raw = self._values.get(name.lower())
        if raw is None:
            return default
        if raw.strip().lower() == "none":
            return None
        try:
            value = float(raw)
        except ValueError:
            raise self.error(name, f"must be a number of seconds, got {raw!r}") from None
        if not math.isfinite(value) or value < 0:
            raise self.error(name, f"must be a finite number >= 0, got {raw!r}")
        return value

    def choice(self, name: str, choices: Sequence[str], default: str | None = None) -> str:
        value = self.text(name, default).strip().lower()
        if value not in choices:
            raise self.error(name, f"must be one of {', '.join(choices)}; got {value!r}")
        return value

    def check(self, name: str, convert: Callable[[Any], Any], default: Any) -> Any:
        """The option converted as the same column would be; ``default`` when absent."""
        raw = self._values.get(name.lower())
        if raw is None:
            return default
        try:
            return convert(raw)
        except (ValueError, TypeError) as exc:
            raise self.error(name, str(exc)) from None


# -- the sink ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """An optional per-row column of a sink: its name, the Spark types it may have, and how a
    value becomes what the protocol takes (raising ValueError/LocalProtocolError when it
    cannot). A null means "the option's value, else the protocol's default"."""

    name: str
    kinds: str  # "int", "number" (seconds) or "text"
    convert: Callable[[Any], Any]

    def accepts(self, dtype: DataType) -> bool:
        if self.kinds == "int":
            return isinstance(dtype, _INTEGRAL)
        if self.kinds == "number":
            return isinstance(dtype, _NUMERIC)
        return isinstance(dtype, StringType)


@dataclass
class Row:
    """One validated row: its position in the partition, its body, and its column values
    (converted; ``None`` where the row had no value)."""

    index: int
    body: bytes
    values: dict[str, Any]


@dataclass
class WriteReport(WriterCommitMessage):
    """What one task sent: the commit message Spark carries to the driver.

    ``destinations`` counts jobs per tube, function or queue; ``ids`` holds the first
    ``reportIds`` ids the server (or, for Workq, the client) gave the jobs, in order.
    """

    partition: int
    jobs: int = 0
    destinations: dict[str, int] = field(default_factory=dict)
    ids: list[int | str] = field(default_factory=list)
    report_ids: int = DEFAULT_REPORT_IDS
    #: Rows whose job was there already (Workq ``Duplicate job`` with ``onDuplicate=skip``).
    duplicates: int = 0

    def add(self, destination: str, job_id: int | str) -> None:
        self.jobs += 1
        self.destinations[destination] = self.destinations.get(destination, 0) + 1
        if len(self.ids) < self.report_ids:
            self.ids.append(job_id)


class _RecordingReport(WriteReport):
    """A :class:`WriteReport` that also records a ``put`` event for each job it counts."""

    def record(self, sink: EventSink, system: str, worker: str) -> None:
        self._sink, self._system, self._worker = sink, system, worker

    def add(self, destination: str, job_id: int | str) -> None:
        super().add(destination, job_id)
        self._sink.emit("put", time.time(), self._system, destination, str(job_id), self._worker)

    def plain(self) -> WriteReport:
        return WriteReport(self.partition, self.jobs, self.destinations, self.ids,
                           self.report_ids, self.duplicates)


_SPARK_TYPES: dict[Any, DataType] = {
    int: LongType(), float: DoubleType(), str: StringType(), bytes: BinaryType(),
    bool: BooleanType(), datetime: TimestampType(), list: ArrayType(StringType(), False),
}


def struct_of(fields: Iterable[tuple[str, Any]]) -> StructType:
    """A schema from ``(name, python type)`` pairs, every column nullable."""
    return StructType([StructField(name, _SPARK_TYPES[kind], True) for name, kind in fields])


def int_in(low: int, high: int) -> Callable[[Any], int]:
    """A converter to an integer in ``low..high`` (from an integral column or an option)."""

    def convert(value: Any) -> int:
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ValueError(f"must be an integer, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be an integer, got {value!r}")
        if not low <= value <= high:
            raise ValueError(f"must be {low}..{high}, got {value}")
        return value

    return convert


def seconds_value(value: Any) -> float:
    """Seconds from a number column or an option (finite, >= 0).

    Raises:
        ValueError: not a number, negative, NaN or infinite.
    """
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise ValueError(f"must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"must be a finite number of seconds >= 0, got {value}")
    return seconds


def check_schema(
    opts: Options, schema: StructType, columns: Sequence[Column]
) -> tuple[str, tuple[Column, ...]]:
    """The body column's name and the optional columns present, checked against ``schema``.

    Raises:
        BadOption: no body column or several, a column of the wrong type, an unknown column.
    """
    names = {f.name: f.dataType for f in schema.fields}
    bodies = [name for name in BODY_COLUMNS if name in names]
    if len(bodies) != 1:
        found = f"found {', '.join(bodies)}" if bodies else "found none"
        raise BadOption(
            f"format {opts.fmt!r}: the DataFrame needs exactly one job body column, "
            f"{' or '.join(BODY_COLUMNS)} (binary or string); {found}"
        )
    body = bodies[0]
    if not isinstance(names[body], (BinaryType, StringType)):
        raise BadOption(f"format {opts.fmt!r}: column {body!r} must be binary or string, "
                        f"not {names[body].simpleString()}")
    known = {c.name: c for c in columns}
    present = []
    for name, dtype in names.items():
        if name == body:
            continue
        column = known.get(name)
        if column is None:
            raise BadOption(
                f"format {opts.fmt!r}: unknown column {name!r}; a row may have {body!r} and "
                f"{', '.join(known)} (select only those)"
            )
        if not column.accepts(dtype):
            want = {"int": "an integer type", "number": "a number type", "text": "string"}
            raise BadOption(f"format {opts.fmt!r}: column {name!r} must be "
                            f"{want[column.kinds]}, not {dtype.simpleString()}")
        present.append(column)
    return body, tuple(present)


def iter_rows(
    batches: Iterable[Any], partition: int, body: str, columns: Sequence[Column],
    max_body: int | None = None,
) -> Iterator[Row]:
    """The rows of a task's Arrow batches, validated and converted, in order.

    Raises:
        BadRow: at the first row that cannot become a job.
    """
    index = 0
    for batch in batches:
        bodies = batch.column(body).to_pylist()
        values = {c.name: batch.column(c.name).to_pylist() for c in columns}
        for i, raw in enumerate(bodies):
            if raw is None:
                raise BadRow(partition, index, body, "is null: every job needs a body")
            data = raw.encode() if isinstance(raw, str) else raw
            if max_body is not None and len(data) > max_body:
                raise BadRow(partition, index, body,
                             f"is {len(data)} bytes, over the server's limit of {max_body}")
            converted: dict[str, Any] = {}
            for c in columns:
                value = values[c.name][i]
                if value is None:
                    converted[c.name] = None
                    continue
                try:
                    converted[c.name] = c.convert(value)
                except (ValueError, TypeError) as exc:  # LocalProtocolError is a ValueError
                    raise BadRow(partition, index, c.name, str(exc)) from None
            yield Row(index, data, converted)
            index += 1


def chunks(rows: Iterator[Row], size: int = CHUNK_ROWS) -> Iterator[list[Row]]:
    """``rows`` in lists of ``size``, each one checked whole before it is yielded: a
    :class:`BadRow` propagates before the chunk that holds it is yielded, so nothing of that
    chunk is sent (the chunks before it were yielded: sent and answered)."""
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def partition_id() -> int:
    """The running task's partition (0 outside a task)."""
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class QueueWriter(DataSourceArrowWriter):
    """A sink: each task sends its rows on one connection with the protocol's pipelined bulk
    calls, and reports what it sent; the driver logs the totals. Subclasses supply
    :meth:`send` and the protocol's noun for what was sent."""

    fmt: ClassVar[str] = ""
    sent: ClassVar[str] = "sent"

    def __init__(self, body: str, columns: tuple[Column, ...], report_ids: int) -> None:
        self.body = body
        self.columns = columns
        self.report_ids = report_ids
        #: Option ``events``: a directory where each task records a ``put`` event per job
        #: (``jobwire.events``), so that the metrics pipeline knows when each job's wait began.
        self.events: str | None = None

    def recording(self, opts: Options) -> Self:
        """Take the ``events`` option (a directory every executor can write to); returns self."""
        self.events = opts.optional("events")
        return self

    def write(self, iterator: Iterator[Any]) -> WriteReport:
        partition = partition_id()
        if self.events is None:
            report = WriteReport(partition, report_ids=self.report_ids)
            self._send_counted(iterator, partition, report)
            return report
        with EventSink(self.events, max_buffered=1_000_000) as sink:
            recording = _RecordingReport(partition, report_ids=self.report_ids)
            recording.record(sink, self.fmt, default_worker_id())
            self._send_counted(iterator, partition, recording)
        # The commit message goes to the driver: without the sink (which cannot be pickled).
        return recording.plain()

    def _send_counted(self, batches: Iterator[Any], partition: int, report: WriteReport) -> None:
        """:meth:`send`; a failure gets a note saying what this attempt of the task had sent
        (it stays queued: Spark's retry of the task sends those rows again)."""
        try:
            self.send(batches, partition, report)
        except Exception as exc:
            context = TaskContext.get()
            attempt = context.attemptNumber() if context is not None else 0
            exc.add_note(  # type: ignore[attr-defined]  # Python >= 3.11, as PySpark 4 is
                f"jobwire.spark: attempt {attempt} of the task for partition {partition} had "
                f"{self.sent} {report.jobs} jobs ({report.duplicates} rows were there already) "
                f"before this failure; they stay queued, and a retry of the task sends its "
                f"rows again from the first"
            )
            raise

    def send(self, batches: Iterator[Any], partition: int, report: WriteReport) -> None:
        """Send the task's rows, filling ``report``.

        Raises:
            BadRow, RowRefused, JobwireError: the task fails; what was sent stays sent.
        """
        raise NotImplementedError

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        reports = [m for m in messages if isinstance(m, WriteReport)]
        totals: dict[str, int] = {}
        for report in reports:
            for name, count in report.destinations.items():
                totals[name] = totals.get(name, 0) + count
        driver_log(logging.INFO, "%s sink: %d jobs %s by %d tasks: %s (%d rows were there "
                   "already)", self.fmt, sum(r.jobs for r in reports), self.sent, len(reports),
                   totals, sum(r.duplicates for r in reports))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        reports = [m for m in messages if isinstance(m, WriteReport)]
        driver_log(
            logging.WARNING,
            "%s sink: the write failed; %d jobs %s by the %d tasks that finished stay queued, "
            "and so do those each failed attempt of a task had %s before it failed (its error "
            "says how many; a retried task sends its rows again). A queue cannot roll back.",
            self.fmt, sum(r.jobs for r in reports), self.sent, len(reports), self.sent,
        )


def driver_log(level: int, message: str, *args: object) -> None:
    """Log on the ``jobwire.spark`` logger from Spark's Python process on the driver (where a
    sink's ``commit``/``abort`` and the stream readers run). Nothing configures logging in that
    process, so without a handler of its own the logger gets one that writes to its stderr,
    which Spark passes on to the driver's output: the totals reach the user."""
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
    logger.log(level, message, *args)


def refuse_overwrite(opts: Options, overwrite: bool) -> None:
    """Raises BadOption for ``mode("overwrite")``: a queue cannot be replaced."""
    if overwrite:
        raise BadOption(
            f"format {opts.fmt!r}: mode 'overwrite' is not supported: jobs already queued "
            "cannot be replaced. Write with .mode('append'): it adds the rows as new jobs (Spark "
            "refuses its default mode, errorifexists, for every Python data source)"
        )


# -- the stream reader ---------------------------------------------------------------------------


J = TypeVar("J")

#: Rows per input partition of a stream batch (a batch of more rows is split).
PARTITION_ROWS = 4096


@dataclass
class _Batch(Generic[J]):
    """A batch the stream reader took: its offsets, what acknowledges its jobs, its rows."""

    start: int
    end: int
    jobs: list[J]
    rows: list[tuple[Any, ...]]


class HeldJobsReader(DataSourceStreamReader, SupportsTriggerAvailableNow, Generic[J]):
    """A stream of jobs taken on the driver and acknowledged once Spark has committed their
    batch.

    Runs in Spark's stream-source process on the driver. The offset counts the jobs this query
    has taken (``{"taken": n, "source": <digest of the options>}``). ``latestOffset`` takes up
    to ``maxJobsPerBatch`` jobs without waiting and holds them; ``partitions`` hands their rows
    to Spark. A batch's jobs are acknowledged (deleted, completed) when Spark says the batch is
    committed: ``commit(end)``, and ``latestOffset(start)`` (Spark asks for a new batch only
    once the last one is in its commit log, and calls ``commit`` for it only when a later batch
    has data). When the query stops, Spark ends this process (SIGTERM): :meth:`stop` then
    acknowledges the held batches that the query's commit log (option ``checkpointLocation``,
    the query's own) shows committed and gives the others back.

    ``trigger(availableNow=True)``: the jobs ready when the query starts (:meth:`ready`), in
    batches of at most ``maxJobsPerBatch``, each acknowledged when Spark asks for the next.

    A batch that Spark replays after a restart (its offsets logged but never committed) comes
    back empty: the jobs the stopped query held come back to the queue (beanstalk: when its
    connection closed; Workq: at the end of their TTR; qless: when their lock runs out) and a
    later batch takes them again. At-least-once.
    """

    fmt: ClassVar[str] = ""

    def __init__(self, max_jobs: int) -> None:
        self.max_jobs = max_jobs
        #: The digest of the options, in every offset: finds this source in a commit log.
        self.source = ""
        #: The query's checkpoint directory (a local path), to read its commit log at stop.
        self.checkpoint: Path | None = None
        self._held: list[_Batch[J]] = []
        self._position = 0
        self._budget: int | None = None
        self._armed = False
        self._busy = 0
        self._stopping = False
        self._stopped = False

    def settling(self, opts: Options) -> Self:
        """Take the source's identity and the ``checkpointLocation`` option; returns self.

        Raises:
            BadOption: a checkpoint that is not on the driver's local file system.
        """
        self.source = opts.identity()
        location = opts.optional("checkpointLocation")
        if location is not None:
            path = location.removeprefix("file://") if location.startswith("file://") else (
                location.removeprefix("file:"))
            if "://" in path or not path:
                raise opts.error("checkpointLocation", "the stream reads the query's commit "
                                 f"log from the driver's file system: a local path, not "
                                 f"{location!r}")
            self.checkpoint = Path(path)
        return self

    # -- what each queue supplies ---------------------------------------------------------------

    def take(self, limit: int) -> list[tuple[J, tuple[Any, ...]]]:
        """Up to ``limit`` jobs available now: (what acknowledges it, its row)."""
        raise NotImplementedError

    def acknowledge(self, jobs: list[J]) -> None:
        """Delete or complete ``jobs``."""
        raise NotImplementedError

    def ready(self) -> int | None:
        """How many jobs are ready now (None: unknown; ``availableNow`` then reads until the
        queue has none)."""
        return None

    def close(self) -> None:
        """Close the connection (the jobs still held go back as the server does it)."""

    # -- Spark's calls --------------------------------------------------------------------------

    def _offset(self, taken: int) -> dict[str, Any]:
        return {"taken": taken, "source": self.source}

    def initialOffset(self) -> dict[str, Any]:
        with self._call():
            return self._offset(0)

    def prepareForTriggerAvailableNow(self) -> None:
        with self._call():
            self._budget = self.ready()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        with self._call():
            begin = self._position if start is None else int(start["taken"])
            self._settle(begin)  # Spark plans a batch only once the last one has committed
            want = self.max_jobs if self._budget is None else min(self.max_jobs, self._budget)
            taken = self.take(want) if want > 0 else []
            if self._budget is not None:
                self._budget -= len(taken)
            if not taken:
                return dict(start) if start is not None else self._offset(begin)
            end = begin + len(taken)
            self._held.append(_Batch(begin, end, [job for job, _ in taken],
                                     [row for _, row in taken]))
            self._position = end
            return self._offset(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        with self._call():
            upto = int(end["taken"])
            batch = next((b for b in self._held if b.end == upto), None)
            if batch is None:
                if int(start["taken"]) != upto:
                    logger.warning(
                        "%s stream: batch %s..%s is replayed after a restart; its jobs were "
                        "held by the query that stopped and come back to the queue, to be read "
                        "by a later batch", self.fmt, start, end)
                return [InputPartition(())]
            rows = batch.rows
            return [InputPartition(tuple(rows[i:i + PARTITION_ROWS]))
                    for i in range(0, len(rows), PARTITION_ROWS)] or [InputPartition(())]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        # On an executor: the rows travelled in the partition.
        return iter(partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        with self._call():
            self._settle(int(end["taken"]))

    def stop(self) -> None:
        """The query stopped: acknowledge the held batches its commit log shows committed,
        give the others back (logged), close the connection."""
        if self._stopped:
            return
        self._stopped = True
        try:
            committed = self._committed()
            if committed is not None:
                self._settle(committed)
            left = sum(len(b.jobs) for b in self._held)
            if left:
                why = ("the query's commit log does not show their batch committed"
                       if self.checkpoint is not None else
                       "Spark did not say their batch committed; give the stream the query's "
                       "option checkpointLocation to settle such batches when it stops")
                driver_log(logging.WARNING, "%s stream: stopped holding %d jobs, which go back "
                           "to the queue and will be read again (%s)", self.fmt, left, why)
        finally:
            self._held = []
            self.close()

    # -- internals ------------------------------------------------------------------------------

    def _settle(self, upto: int) -> None:
        """Acknowledge every held batch that ends at or before ``upto``."""
        done = [b for b in self._held if b.end <= upto]
        if not done:
            return
        self._held = [b for b in self._held if b.end > upto]
        for batch in done:
            self.acknowledge(batch.jobs)

    def _committed(self) -> int | None:
        """This source's offset in the latest batch of the checkpoint's commit log, or None."""
        if self.checkpoint is None or not self._held:
            return None
        try:
            names = [p.name for p in (self.checkpoint / "commits").iterdir()]
        except OSError:
            return None
        for batch_id in sorted((int(n) for n in names if n.isdigit()), reverse=True)[:100]:
            try:
                lines = (self.checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
            except OSError:
                continue
            for line in lines[2:]:  # a version line, the batch's metadata, an offset per source
                try:
                    offset = json.loads(line)
                except ValueError:
                    continue
                if isinstance(offset, dict) and offset.get("source") == self.source:
                    return int(offset["taken"])
        return None

    @contextmanager
    def _call(self) -> Iterator[None]:
        """Around each of Spark's calls: SIGTERM (the query stopping) waits for it to end."""
        self._arm()
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
        if self._stopping:
            raise SystemExit(0)

    def _arm(self) -> None:
        """Catch SIGTERM, with which Spark ends this process when the query stops, so that
        :meth:`stop` runs (Spark's runner calls it on the way out). Only in the process's main
        thread, where Spark calls the reader."""
        if self._armed or threading.current_thread() is not threading.main_thread():
            return
        self._armed = True

        def on_sigterm(signum: int, frame: Any) -> None:
            if self._stopping:
                return
            self._stopping = True
            if not self._busy:
                raise SystemExit(0)

        signal.signal(signal.SIGTERM, on_sigterm)


# -- request/reply over a DataFrame --------------------------------------------------------------


C = TypeVar("C")


class Caller(Generic[C]):
    """Runs one call per value with many in flight, for ``mapInArrow``: ``connections``
    clients opened by ``connect`` in one event loop that lives as long as the task, each
    shared by ``per_connection`` concurrent calls. A call's error is its row's outcome (the
    clients replace a broken connection on their next call).

    Use as a context manager; :meth:`map` returns, per value, ``(result, None)`` or
    ``(None, error text)``.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[C]],
        close: Callable[[C], Awaitable[None]],
        call: Callable[[C, bytes], Awaitable[bytes]],
        connections: int,
        per_connection: int,
    ) -> None:
        self._connect, self._close, self._call = connect, close, call
        self._connections, self._per = connections, per_connection
        self._clients: list[C | None] = []
        self._portal_cm: Any = None
        self._portal: Any = None

    def __enter__(self) -> Caller[C]:
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._clients = [None] * self._connections
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._portal.call(self._close_all)
        finally:
            self._portal_cm.__exit__(None, None, None)

    async def _close_all(self) -> None:
        for client in self._clients:
            if client is not None:
                await self._close(client)
        self._clients = [None] * self._connections

    def map(self, values: list[bytes | None]) -> list[tuple[bytes | None, str | None]]:
        return self._portal.call(self._map, values)  # type: ignore[no-any-return]

    async def _map(self, values: list[bytes | None]) -> list[tuple[bytes | None, str | None]]:
        out: list[tuple[bytes | None, str | None]] = [(None, None)] * len(values)
        todo = iter(range(len(values)))
        for slot, client in enumerate(self._clients):  # before the lanes start: no races
            if client is None:
                try:
                    self._clients[slot] = await self._connect()
                except Exception as exc:
                    return [(None, describe(exc))] * len(values)

        clients = [client for client in self._clients if client is not None]

        async def lane(client: C) -> None:
            for i in todo:
                value = values[i]
                if value is None:
                    out[i] = (None, "input is null")
                    continue
                try:
                    out[i] = (await self._call(client, value), None)
                except Exception as exc:  # the clients reconnect by themselves after a failure
                    out[i] = (None, describe(exc))

        async with anyio.create_task_group() as tg:
            for client in clients:
                for _ in range(self._per):
                    tg.start_soon(lane, client)
        return out


def call_column(
    df: DataFrame, input_col: str, output_col: str, error_col: str,
    caller: Callable[[], Caller[Any]],
) -> DataFrame:
    """``df`` with ``output_col`` (binary: each row's result) and ``error_col`` (string: why a
    row has no result) added, computed by ``caller()`` per task on ``mapInArrow``.

    Raises:
        BadOption: ``input_col`` is missing or not binary/string, or an output name is taken.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    if input_col not in fields:
        raise BadOption(f"no column {input_col!r} in the DataFrame ({', '.join(fields)})")
    if not isinstance(fields[input_col], (BinaryType, StringType)):
        raise BadOption(f"column {input_col!r} must be binary or string, "
                        f"not {fields[input_col].simpleString()}")
    for name in (output_col, error_col):
        if name in fields:
            raise BadOption(f"the DataFrame already has a column {name!r}: pick other names")
    if output_col == error_col:
        raise BadOption("the result and error columns need different names")
    schema = StructType([*df.schema.fields, StructField(output_col, BinaryType(), True),
                         StructField(error_col, StringType(), True)])

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        with caller() as runner:
            for batch in batches:
                raw = batch.column(input_col).to_pylist()
                values = [v.encode() if isinstance(v, str) else v for v in raw]
                outcome = runner.map(values)
                yield pa.RecordBatch.from_arrays(
                    [*batch.columns, pa.array([r for r, _ in outcome], type=pa.binary()),
                     pa.array([e for _, e in outcome], type=pa.string())],
                    names=[*batch.schema.names, output_col, error_col],
                )

    return df.mapInArrow(run, schema)
