"""What every queue format shares: options, errors, the sink's row loop and commit report, the
stream reader that holds jobs until Spark commits, and the request/reply runner.

Everything here runs where Spark puts it: a ``DataSource`` is pickled with its parsed options
and sent to the executors, which open their own connections; only the stream readers (Spark's
simple stream reader) and ``commit``/``abort`` run on the driver.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar, Generic, TypeVar

import anyio
import anyio.from_thread
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
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
    out of range). The task fails with it; the rows before it in the task were sent, the row
    and those after it were not, and every reply of what was sent had been read.

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


class Options:
    """A format's options (Spark hands them over as strings, names case-insensitive), read with
    types; every mistake is a :class:`BadOption` that names the format and the option."""

    def __init__(self, fmt: str, options: Mapping[str, str]) -> None:
        self.fmt = fmt
        self._values = {k.lower(): v for k, v in options.items() if v is not None}

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
    """``rows`` in lists of ``size``. A :class:`BadRow` ends the rows: the rows before it are
    yielded first (so they are sent and answered), then it is raised."""
    chunk: list[Row] = []
    failure: BadRow | None = None
    try:
        for row in rows:
            chunk.append(row)
            if len(chunk) >= size:
                yield chunk
                chunk = []
    except BadRow as exc:
        failure = exc
    if chunk:
        yield chunk
    if failure is not None:
        raise failure


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
            self.send(iterator, partition, report)
            return report
        with EventSink(self.events, max_buffered=1_000_000) as sink:
            recording = _RecordingReport(partition, report_ids=self.report_ids)
            recording.record(sink, self.fmt, default_worker_id())
            self.send(iterator, partition, recording)
        # The commit message goes to the driver: without the sink (which cannot be pickled).
        return recording.plain()

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
        logger.info("%s sink: %d jobs %s by %d tasks: %s (%d rows were there already)",
                    self.fmt, sum(r.jobs for r in reports), self.sent, len(reports), totals,
                    sum(r.duplicates for r in reports))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        reports = [m for m in messages if isinstance(m, WriteReport)]
        logger.warning(
            "%s sink: the write failed; %d jobs %s by the %d tasks that finished stay queued "
            "(a queue cannot roll back; the failed tasks' rows before their failure too)",
            self.fmt, sum(r.jobs for r in reports), self.sent, len(reports),
        )


def refuse_overwrite(opts: Options, overwrite: bool) -> None:
    """Raises BadOption for ``mode("overwrite")``: a queue cannot be replaced."""
    if overwrite:
        raise BadOption(f"format {opts.fmt!r}: mode 'overwrite' is not supported (a queue "
                        "cannot be replaced); use mode('append')")


# -- the stream reader ---------------------------------------------------------------------------


J = TypeVar("J")


class HeldJobsReader(SimpleDataSourceStreamReader, Generic[J]):
    """A stream of jobs taken on the driver and acknowledged when Spark commits their batch.

    The offset counts the jobs this query has taken (``{"taken": n}``). ``read`` takes up to
    ``maxJobsPerBatch`` jobs without waiting and holds them; ``commit(end)`` acknowledges
    (deletes, completes) every job held by the batches up to ``end``, and so does ``read(start)``
    for the batches up to ``start`` (Spark asks for a new batch only after the last one was
    committed to its commit log). A batch that Spark
    replays after a restart (``readBetweenOffsets``) comes back empty: the jobs the crashed
    query held are given back by the server (beanstalk: when its connection closed; Workq: at
    the end of their TTR) and a later batch takes them again. At-least-once.
    """

    fmt: ClassVar[str] = ""

    def __init__(self, max_jobs: int) -> None:
        self.max_jobs = max_jobs
        self._held: list[tuple[int, list[J]]] = []

    def take(self, limit: int) -> list[tuple[J, tuple[Any, ...]]]:
        """Up to ``limit`` jobs available now: (what acknowledges it, its row)."""
        raise NotImplementedError

    def acknowledge(self, jobs: list[J]) -> None:
        """Delete or complete ``jobs``."""
        raise NotImplementedError

    def initialOffset(self) -> dict[str, int]:
        return {"taken": 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        # Spark plans the next batch only once the previous one is in its commit log, and may
        # call commit() for it only when a later batch has data: acknowledge here too.
        self.commit(start)
        taken = self.take(self.max_jobs)
        if not taken:
            return iter(()), start
        end = {"taken": int(start["taken"]) + len(taken)}
        self._held.append((end["taken"], [job for job, _ in taken]))
        return iter([row for _, row in taken]), end

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[tuple[Any, ...]]:
        logger.warning(
            "%s stream: batch %s..%s is replayed after a restart; its jobs were held by the "
            "query that stopped and come back to the queue, to be read by a later batch",
            self.fmt, start, end,
        )
        return iter(())

    def commit(self, end: dict[str, int]) -> None:
        upto = int(end["taken"])
        done = [jobs for taken, jobs in self._held if taken <= upto]
        self._held = [(taken, jobs) for taken, jobs in self._held if taken > upto]
        for jobs in done:
            self.acknowledge(jobs)


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
