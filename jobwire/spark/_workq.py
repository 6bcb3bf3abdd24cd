"""The ``workq`` format: an ``add`` sink, ``inspect queues|jobs|scheduled-jobs`` as tables, a
queue as a stream (lease on the driver, complete on commit), and :func:`workq_run`, ``run`` as
a column."""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from jobwire._url import resolve_address
from jobwire.errors import InvalidAddress, JobwireConnectionError, JobwireError
from workq_client import (
    DEFAULT_TTL,
    DEFAULT_TTR,
    I32_MAX,
    I32_MIN,
    MAX_ATTEMPTS,
    MAX_PAYLOAD,
    MAX_TTL_MS,
    MAX_TTR_MS,
    AsyncClient,
    BulkError,
    Client,
    DuplicateJob,
    InspectJob,
    JobInfo,
    JobState,
    NotFound,
    TimedOut,
    WorkqError,
    validate_id,
    validate_name,
)

from ._common import (
    BadOption,
    BadRow,
    Caller,
    Column,
    HeldJobsReader,
    Options,
    QueueWriter,
    Row,
    RowRefused,
    WriteReport,
    call_column,
    check_schema,
    chunks,
    int_in,
    iter_rows,
    logger,
    refuse_overwrite,
    seconds_value,
    struct_of,
)

__all__ = ["RunFailed", "WorkqDataSource", "workq_run"]

TABLES = ("queues", "jobs", "scheduled-jobs")
STREAM_SCHEMA = "id string, name string, ttr double, payload binary"
#: Records per ``inspect`` page (the protocol's largest).
PAGE = 100


def _ms(what: str, high: int) -> Any:
    def convert(value: Any) -> int:
        ms = math.ceil(round(seconds_value(value) * 1000, 6))
        if not 1 <= ms <= high:
            raise ValueError(f"{what} must be 0.001..{high / 1000:g} seconds, got {value}")
        return ms

    return convert


COLUMNS = (
    Column("name", "text", validate_name),
    Column("id", "text", validate_id),
    Column("ttr", "number", _ms("ttr", MAX_TTR_MS)),
    Column("ttl", "number", _ms("ttl", MAX_TTL_MS)),
    Column("priority", "int", int_in(I32_MIN, I32_MAX)),
    Column("max_attempts", "int", int_in(0, MAX_ATTEMPTS)),
)


def _url(opts: Options) -> str:
    url = opts.text("url")
    try:
        resolve_address(url, scheme="workq", default_port=9922, unix=False)
    except (InvalidAddress, TypeError) as exc:
        raise opts.error("url", str(exc)) from None
    return url


@dataclass(frozen=True)
class Settings:
    """The parsed options (picklable: they travel to the executors)."""

    url: str
    names: tuple[str, ...]
    ttr_ms: int
    ttl_ms: int
    priority: int
    max_attempts: int
    window: int
    timeout: float | None
    max_jobs: int
    report_ids: int
    skip_duplicates: bool

    @classmethod
    def parse(cls, opts: Options) -> Settings:
        names: list[str] = []
        for part in (opts.optional("name") or "").split(","):
            name = part.strip()
            if name:
                try:
                    names.append(validate_name(name))
                except ValueError as exc:
                    raise opts.error("name", str(exc)) from None
        return cls(
            url=_url(opts),
            names=tuple(names),
            ttr_ms=opts.check("ttr", _ms("ttr", MAX_TTR_MS), int(DEFAULT_TTR * 1000)),
            ttl_ms=opts.check("ttl", _ms("ttl", MAX_TTL_MS), int(DEFAULT_TTL * 1000)),
            priority=opts.check("priority", int_in(I32_MIN, I32_MAX), 0),
            max_attempts=opts.check("maxAttempts", int_in(0, MAX_ATTEMPTS), 0),
            window=opts.integer("window", 256, 1, 65536),
            timeout=opts.seconds("timeout", 10.0),
            max_jobs=opts.integer("maxJobsPerBatch", 1000, 1, 10_000_000),
            report_ids=opts.integer("reportIds", 1000, 0, 10_000_000),
            skip_duplicates=opts.choice("onDuplicate", ("skip", "fail"), "skip") == "skip",
        )

    def connect(self) -> Client:
        return Client(self.url, timeout=self.timeout)


class WorkqDataSource(DataSource):
    """``format("workq")``: see docs/spark.md for every option."""

    @classmethod
    def name(cls) -> str:
        return "workq"

    def _opts(self) -> Options:
        return Options("workq", self.options)

    def schema(self) -> StructType | str:
        opts = self._opts()
        if not opts.has("table"):
            return STREAM_SCHEMA
        return TABLE_SCHEMAS[opts.choice("table", TABLES)]

    def writer(self, schema: StructType, overwrite: bool) -> WorkqWriter:
        opts = self._opts()
        refuse_overwrite(opts, overwrite)
        body, columns = check_schema(opts, schema, COLUMNS)
        settings = Settings.parse(opts)
        if len(settings.names) > 1:
            raise opts.error("name", "a sink adds to one queue (or use a 'name' column)")
        if not settings.names and not any(c.name == "name" for c in columns):
            raise opts.error("name", "is required (or a 'name' column)")
        return WorkqWriter(settings, body, columns).recording(opts)

    def reader(self, schema: StructType) -> WorkqTableReader:
        opts = self._opts()
        return WorkqTableReader(Settings.parse(opts), opts.choice("table", TABLES))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = self._opts()
        if opts.has("table"):
            raise opts.error("table", "a stream reads jobs: leave 'table' out")
        settings = Settings.parse(opts)
        if not settings.names:
            raise opts.error("name", "is required: the queue(s) to lease from, comma-separated")
        return WorkqStream(settings).settling(opts)


# -- sink ----------------------------------------------------------------------------------------


class WorkqWriter(QueueWriter):
    """Each task: one connection, pipelined ``add_many`` (``window`` in flight) per run of rows
    with the same queue and fields, every reply read before the next run. Ids are the row's
    ``id`` or a new UUIDv4 (reported)."""

    fmt = "workq"
    sent = "added"

    def __init__(self, settings: Settings, body: str, columns: tuple[Column, ...]) -> None:
        super().__init__(body, columns, settings.report_ids)
        self.settings = settings

    def send(self, batches: Iterator[Any], partition: int, report: WriteReport) -> None:
        s = self.settings
        default_name = s.names[0] if s.names else None
        with s.connect() as client:
            rows = iter_rows(batches, partition, self.body, self.columns, MAX_PAYLOAD)
            for chunk in chunks(rows):
                # Every row of the chunk checked (BadRow) before any of it is sent.
                jobs = [(row, self._job(row, default_name, partition)) for row in chunk]
                self._send(client, jobs, partition, report)

    def _job(self, row: Row, default_name: str | None, partition: int) -> _Job:
        s, v = self.settings, row.values
        name = v.get("name") or default_name
        if name is None:
            raise BadRow(partition, row.index, "name", "is null and no 'name' option is set")

        def pick(key: str, default: int) -> int:
            value = v.get(key)
            return default if value is None else int(value)

        return _Job(name, pick("ttr", s.ttr_ms), pick("ttl", s.ttl_ms),
                    pick("priority", s.priority), pick("max_attempts", s.max_attempts),
                    v.get("id") or str(uuid.uuid4()))  # our own id: a resent add cannot duplicate

    def _send(
        self, client: Client, jobs: list[tuple[Row, _Job]], partition: int, report: WriteReport
    ) -> None:
        """``add_many`` per run of rows that differ only in payload and id (``add`` for a row
        with max-attempts, which ``add_many`` does not carry)."""
        start = 0
        while start < len(jobs):
            head = jobs[start][1]
            end = start + 1
            if not head.max_attempts:
                while end < len(jobs) and jobs[end][1].same_run(head):
                    end += 1
            self._add_run(client, jobs[start:end], partition, report)
            start = end

    def _add_run(
        self, client: Client, run: list[tuple[Row, _Job]], partition: int, report: WriteReport
    ) -> None:
        """Add one run. ``Duplicate job`` means the id is already there (a retried task, or an
        add whose reply a lost connection swallowed): with ``onDuplicate=skip`` the row counts
        as done, otherwise it fails the task. After that error the client reconnects (the
        server may be out of step), so the adds pipelined behind it got no answer: one
        pipelined ``inspect job`` per id among them tells which the server holds (they count as
        there already), and the others are added again. Linear: each round settles every row
        the server already holds; another round happens only if an id appears meanwhile."""
        todo = list(run)
        while todo:
            outcomes = self._add(client, todo)
            failed = [(k, o) for k, o in enumerate(outcomes) if isinstance(o, BaseException)]
            for (_, job), outcome in zip(todo, outcomes, strict=True):
                if isinstance(outcome, str):
                    report.add(job.name, job.job_id)
            if not failed:
                return
            index, error = failed[0]
            if not (isinstance(error, DuplicateJob) and self.settings.skip_duplicates):
                raise RowRefused(partition, todo[index][0].index, error) from error
            unanswered = []
            for item, outcome in zip(todo, outcomes, strict=True):
                if isinstance(outcome, DuplicateJob):
                    report.duplicates += 1
                elif isinstance(outcome, BaseException):
                    unanswered.append(item)
            held = self._held_ids(client, [job.job_id for _, job in unanswered])
            report.duplicates += len(held)
            todo = [item for item in unanswered if item[1].job_id not in held]

    def _add(self, client: Client, todo: list[tuple[Row, _Job]]) -> list[object]:
        """Add ``todo`` (a run: ``add_many``; a row with max-attempts: ``add``); per row its
        id or its exception."""
        head = todo[0][1]
        try:
            if head.max_attempts:
                row, job = todo[0]
                client.add(job.name, row.body, ttr=job.ttr_ms / 1000, ttl=job.ttl_ms / 1000,
                           priority=job.priority, max_attempts=job.max_attempts,
                           job_id=job.job_id)
            else:
                client.add_many(
                    head.name, [row.body for row, _ in todo], ttr=head.ttr_ms / 1000,
                    ttl=head.ttl_ms / 1000, priority=head.priority,
                    job_ids=[job.job_id for _, job in todo], window=self.settings.window,
                )
        except BulkError as exc:
            return list(exc.results)
        except WorkqError as exc:
            return [exc]
        return [job.job_id for _, job in todo]

    def _held_ids(self, client: Client, ids: list[str]) -> set[str]:
        """The ids of ``ids`` that the server holds a job for (pipelined ``inspect job``).

        Raises:
            JobwireError: the connection failed (the task fails; what was added stays).
        """
        if not ids:
            return set()
        replies = client.call_many([InspectJob(job_id) for job_id in ids],
                                   window=self.settings.window)
        held: set[str] = set()
        for job_id, reply in zip(ids, replies, strict=True):
            if not isinstance(reply, JobwireError):
                held.add(job_id)
            elif not isinstance(reply, NotFound):
                raise reply
        return held


@dataclass(frozen=True)
class _Job:
    """A row's job fields (the payload stays in the row)."""

    name: str
    ttr_ms: int
    ttl_ms: int
    priority: int
    max_attempts: int
    job_id: str

    def same_run(self, other: _Job) -> bool:
        return (self.name, self.ttr_ms, self.ttl_ms, self.priority, self.max_attempts) == (
            other.name, other.ttr_ms, other.ttl_ms, other.priority, other.max_attempts)


# -- tables --------------------------------------------------------------------------------------


_JOB_FIELDS: list[tuple[str, Any]] = [
    ("id", str), ("name", str), ("ttr", float), ("ttl", float), ("payload", bytes),
    ("max_attempts", int), ("attempts", int), ("max_fails", int), ("fails", int),
    ("priority", int), ("state", str), ("created", datetime), ("time", datetime),
]
TABLE_SCHEMAS: dict[str, StructType] = {
    "queues": struct_of([("name", str), ("ready_len", int), ("scheduled_len", int)]),
    "jobs": struct_of(_JOB_FIELDS),
    "scheduled-jobs": struct_of(_JOB_FIELDS),
}


def _job_row(job: JobInfo) -> tuple[Any, ...]:
    state = job.state.name.lower() if isinstance(job.state, JobState) else str(job.state)
    return (job.job_id, job.name, job.ttr, job.ttl, job.payload, job.max_attempts, job.attempts,
            job.max_fails, job.fails, job.priority, state, job.created, job.time)


class WorkqTableReader(DataSourceReader):
    """One task, one connection: ``inspect queues``, or ``inspect jobs``/``scheduled-jobs`` of
    the queues named by ``name`` (every queue when not given), page by page."""

    def __init__(self, settings: Settings, table: str) -> None:
        self.settings = settings
        self.table = table

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        with self.settings.connect() as client:
            if self.table == "queues":
                for queue in _queues(client):
                    yield (queue.name, queue.ready_len, queue.scheduled_len)
                return
            names = self.settings.names or tuple(q.name for q in _queues(client))
            inspect = (client.inspect_jobs if self.table == "jobs"
                       else client.inspect_scheduled_jobs)
            for name in names:
                offset = 0
                while True:
                    try:
                        page = inspect(name, offset, PAGE)
                    except NotFound:  # no such queue (or it went away meanwhile)
                        break
                    for job in page:
                        yield _job_row(job)
                    if len(page) < PAGE:
                        break
                    offset += PAGE


def _queues(client: Client) -> Iterator[Any]:
    offset = 0
    while True:
        page = client.inspect_queues(offset, PAGE)
        yield from page
        if len(page) < PAGE:
            return
        offset += PAGE


# -- stream --------------------------------------------------------------------------------------


class WorkqStream(HeldJobsReader[str]):
    """Leases jobs of ``name`` on the driver (``lease`` with a wait of 0, until none is ready
    or ``maxJobsPerBatch``) and completes them (empty result) when their batch commits."""

    fmt = "workq"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.max_jobs)
        self.settings = settings
        self._client: Client | None = None

    def _connection(self) -> Client:
        if self._client is None:
            self._client = self.settings.connect()
        return self._client

    def take(self, limit: int) -> list[tuple[str, tuple[Any, ...]]]:
        client = self._connection()
        taken: list[tuple[str, tuple[Any, ...]]] = []
        while len(taken) < limit:
            try:
                job = client.lease(self.settings.names, wait=0)
            except TimedOut:  # nothing ready now
                break
            taken.append((job.job_id, (job.job_id, job.name, job.ttr, job.payload)))
        return taken

    def ready(self) -> int:
        """The ready jobs of the queues (``inspect queue``; an unknown queue has none)."""
        client = self._connection()
        total = 0
        for name in self.settings.names:
            with contextlib.suppress(NotFound):  # an unknown queue has none
                total += client.inspect_queue(name).ready_len
        return total

    def close(self) -> None:
        """Close the connection (leases end at their TTR: the jobs still held come back
        then)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def acknowledge(self, jobs: list[str]) -> None:
        refused: list[WorkqError] = []
        lost = 0
        for job_id in jobs:
            try:
                self._connection().complete(job_id)
            except WorkqError as exc:  # NotFound, or a result already there
                refused.append(exc)
            except JobwireConnectionError:  # the next call reconnects
                lost += 1
        if refused:
            logger.warning("workq stream: %d jobs could not be completed at commit (their TTR "
                           "or TTL ran out first): they may be delivered again; first: %s",
                           len(refused), refused[0])
        if lost:
            logger.warning("workq stream: %d jobs not completed (connection lost): they come "
                           "back after their TTR", lost)


# -- request/reply -------------------------------------------------------------------------------


class RunFailed(JobwireError):
    """The worker failed the job (``run`` answered success=0); ``data`` is what it reported."""

    def __init__(self, job_id: str, data: bytes) -> None:
        super().__init__(f"job {job_id} failed: {data[:200].decode('utf-8', 'replace')}")
        self.job_id = job_id
        self.data = data


def workq_run(
    df: DataFrame,
    name: str,
    input_col: str,
    *,
    url: str,
    output_col: str = "result",
    error_col: str = "error",
    concurrency: int = 16,
    ttr: float = DEFAULT_TTR,
    wait: float = 60.0,
    priority: int = 0,
    timeout: float | None = 10.0,
) -> DataFrame:
    """Run a Workq job per row (``run``: add, then wait for its result): ``df`` plus
    ``output_col`` (binary, the result) and ``error_col`` (string: ``RunFailed: ...``,
    ``TimedOut: ...``, ``input is null``; null when the row has a result).

    A Workq connection answers in order and ``run`` holds it until the job ends, so each task
    opens ``concurrency`` connections, one ``run`` in flight on each. ``wait``: how long a job
    may wait for a worker; ``ttr``: how long the worker has; ``timeout``: the client's margin
    beyond both. Runs on ``mapInArrow``.

    Raises:
        BadOption: a bad name, url, number or column (on the driver, before anything is sent).
    """
    opts = Options("workq_run", {"url": url})
    _url(opts)
    try:
        validate_name(name)
        ttr_ms = _ms("ttr", MAX_TTR_MS)(ttr)
        int_in(I32_MIN, I32_MAX)(priority)
        seconds_value(wait)
    except ValueError as exc:
        raise BadOption(f"workq_run: {exc}") from None
    if concurrency < 1:
        raise BadOption(f"workq_run: concurrency must be >= 1, got {concurrency}")
    ttr_seconds = ttr_ms / 1000

    def caller() -> Caller[AsyncClient]:
        async def connect() -> AsyncClient:
            return AsyncClient(url, timeout=timeout)

        async def close(client: AsyncClient) -> None:
            await client.aclose()

        async def call(client: AsyncClient, payload: bytes) -> bytes:
            record = await client.run(name, payload, ttr=ttr_seconds, wait=wait,
                                      priority=priority)
            if not record.success:
                raise RunFailed(record.job_id, record.data)
            return record.data

        return Caller(connect, close, call, connections=concurrency, per_connection=1)

    return call_column(df, input_col, output_col, error_col, caller)
