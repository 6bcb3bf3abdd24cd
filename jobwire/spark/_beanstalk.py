"""The ``beanstalk`` format: a sink (put), queue state as tables (stats, stats-tube, peek) and a
tube as a stream (reserve on the driver, delete on commit)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from beanstalk_client import (
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    Client,
    DeadlineSoon,
    Delete,
    Inserted,
    JobStats,
    NotFound,
    Put,
    Reply,
    Reserved,
    ReserveWithTimeout,
    ServerStats,
    TimedOut,
    TubeStats,
    Use,
    validate_tube,
)
from jobwire._url import resolve_address
from jobwire.errors import (
    BulkError,
    InvalidAddress,
    JobwireConnectionError,
    JobwireError,
    NotSent,
    OperationTimeout,
    RemoteProtocolError,
)

from ._common import (
    Column,
    HeldJobsReader,
    Options,
    QueueWriter,
    Row,
    RowRefused,
    WriteReport,
    check_schema,
    chunks,
    int_in,
    iter_rows,
    logger,
    refuse_overwrite,
    seconds_value,
    struct_of,
)

#: Errors that mean a put got no answer (the connection), not that the server refused the row.
_UNANSWERED = (JobwireConnectionError, NotSent, OperationTimeout, RemoteProtocolError)

__all__ = ["BeanstalkDataSource"]

U32_MAX = 2**32 - 1
TABLES = ("stats", "stats-tube", "peek")
STREAM_SCHEMA = "id long, tube string, body binary"
PEEK_STATES = ("ready", "delayed", "buried")


def _whole_seconds(value: Any) -> int:
    seconds = math.ceil(seconds_value(value))
    if seconds > U32_MAX:
        raise ValueError(f"must be at most {U32_MAX} seconds, got {value}")
    return seconds


COLUMNS = (
    Column("priority", "int", int_in(0, U32_MAX)),
    Column("delay", "number", _whole_seconds),
    Column("ttr", "number", _whole_seconds),
    Column("tube", "text", validate_tube),
)


@dataclass(frozen=True)
class Settings:
    """The parsed options (picklable: they travel to the executors)."""

    url: str
    tube: str | None
    priority: int
    delay: int
    ttr: int
    window: int
    timeout: float | None
    max_jobs: int
    report_ids: int

    @classmethod
    def parse(cls, opts: Options) -> Settings:
        url = opts.text("url")
        try:
            resolve_address(url, scheme="beanstalk", default_port=11300)
        except (InvalidAddress, TypeError) as exc:
            raise opts.error("url", str(exc)) from None
        tube = opts.optional("tube")
        return cls(
            url=url,
            tube=None if tube is None else opts.check("tube", validate_tube, None),
            priority=opts.check("priority", int_in(0, U32_MAX), DEFAULT_PRIORITY),
            delay=opts.check("delay", _whole_seconds, 0),
            ttr=opts.check("ttr", _whole_seconds, DEFAULT_TTR),
            window=opts.integer("window", 256, 1, 65536),
            timeout=opts.seconds("timeout", 10.0),
            max_jobs=opts.integer("maxJobsPerBatch", 1000, 1, 10_000_000),
            report_ids=opts.integer("reportIds", 1000, 0, 10_000_000),
        )

    def connect(self) -> Client:
        return Client(self.url, timeout=self.timeout)


class BeanstalkDataSource(DataSource):
    """``format("beanstalk")``: see docs/spark.md for every option."""

    @classmethod
    def name(cls) -> str:
        return "beanstalk"

    def _opts(self) -> Options:
        return Options("beanstalk", self.options)

    def schema(self) -> StructType | str:
        opts = self._opts()
        if not opts.has("table"):
            return STREAM_SCHEMA
        return TABLE_SCHEMAS[opts.choice("table", TABLES)]

    def writer(self, schema: StructType, overwrite: bool) -> BeanstalkWriter:
        opts = self._opts()
        refuse_overwrite(opts, overwrite)
        body, columns = check_schema(opts, schema, COLUMNS)
        settings = Settings.parse(opts)
        return BeanstalkWriter(settings, body, columns).recording(opts)

    def reader(self, schema: StructType) -> BeanstalkTableReader:
        opts = self._opts()
        return BeanstalkTableReader(Settings.parse(opts), opts.choice("table", TABLES))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = self._opts()
        if opts.has("table"):
            raise opts.error("table", "a stream reads jobs: leave 'table' out")
        return BeanstalkStream(Settings.parse(opts)).settling(opts)


# -- sink ----------------------------------------------------------------------------------------


class BeanstalkWriter(QueueWriter):
    """Each task: one connection, ``use`` when a row's tube changes, pipelined puts (``window``
    in flight), every reply read before the next chunk."""

    fmt = "beanstalk"
    sent = "put"

    def __init__(self, settings: Settings, body: str, columns: tuple[Column, ...]) -> None:
        super().__init__(body, columns, settings.report_ids)
        self.settings = settings

    def send(self, batches: Iterator[Any], partition: int, report: WriteReport) -> None:
        s = self.settings
        default_tube = s.tube or "default"
        with s.connect() as client:
            max_size = client.stats()["max-job-size"]
            current = client.use(default_tube)
            rows = iter_rows(batches, partition, self.body, self.columns, max_size)
            for chunk in chunks(rows):
                current = self._put_chunk(client, chunk, current, default_tube, partition, report)

    def _put_chunk(
        self, client: Client, chunk: list[Row], current: str, default_tube: str,
        partition: int, report: WriteReport,
    ) -> str:
        s = self.settings
        commands: list[Any] = []
        owners: list[Row | None] = []  # the row of each put; None for a use
        tubes: list[str] = []
        for row in chunk:
            v = row.values
            tube = v.get("tube") or default_tube
            if tube != current:
                commands.append(Use(tube))
                owners.append(None)
                tubes.append(tube)
                current = tube
            priority = v.get("priority")
            delay = v.get("delay")
            ttr = v.get("ttr")
            commands.append(Put(
                row.body,
                s.priority if priority is None else priority,
                s.delay if delay is None else delay,
                s.ttr if ttr is None else ttr,
            ))
            owners.append(row)
            tubes.append(tube)
        try:
            replies = client.call_many(commands, window=s.window)
        except BulkError as exc:  # the connection failed: what was answered still counts
            replies = cast("list[Reply | JobwireError]", exc.results)
        failure: JobwireError | None = None
        for reply, owner, tube in zip(replies, owners, tubes, strict=True):
            if isinstance(reply, Inserted):
                report.add(tube, reply.job_id)
            elif isinstance(reply, JobwireError) and failure is None:
                if owner is None or isinstance(reply, _UNANSWERED):
                    failure = reply
                else:
                    failure = RowRefused(partition, owner.index, reply)
                failure.__cause__ = reply
        if failure is not None:
            raise failure
        return current


# -- tables --------------------------------------------------------------------------------------


def _key(name: str) -> str:
    return name.replace("-", "_")


SERVER_KEYS = tuple(ServerStats.__annotations__)
TUBE_KEYS = tuple(TubeStats.__annotations__)
JOB_KEYS = tuple(JobStats.__annotations__)
TABLE_SCHEMAS: dict[str, StructType] = {
    "stats": struct_of([(_key(k), t) for k, t in ServerStats.__annotations__.items()]),
    "stats-tube": struct_of([(_key(k), t) for k, t in TubeStats.__annotations__.items()]),
    "peek": struct_of([*((_key(k), t) for k, t in JobStats.__annotations__.items()),
                       ("body", bytes)]),
}


class BeanstalkTableReader(DataSourceReader):
    """One task, one connection: ``stats``; ``stats-tube`` of every tube (or ``tube``);
    ``peek-ready/-delayed/-buried`` of every tube (or ``tube``) with each job's stats-job."""

    def __init__(self, settings: Settings, table: str) -> None:
        self.settings = settings
        self.table = table

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        with self.settings.connect() as client:
            if self.table == "stats":
                stats: dict[str, Any] = dict(client.stats())
                yield tuple(stats.get(k) for k in SERVER_KEYS)
                return
            tubes = [self.settings.tube] if self.settings.tube else client.list_tubes()
            for tube in tubes:
                if self.table == "stats-tube":
                    try:
                        tube_stats: dict[str, Any] = dict(client.stats_tube(tube))
                    except NotFound:  # the tube went away meanwhile
                        continue
                    yield tuple(tube_stats.get(k) for k in TUBE_KEYS)
                else:
                    yield from self._peek(client, tube)

    @staticmethod
    def _peek(client: Client, tube: str) -> Iterator[tuple[Any, ...]]:
        client.use(tube)
        for peek in (client.peek_ready, client.peek_delayed, client.peek_buried):
            try:
                job = peek()
                job_stats: dict[str, Any] = dict(client.stats_job(job))
            except NotFound:  # none in that state, or it went away meanwhile
                continue
            yield (*(job_stats.get(k) for k in JOB_KEYS), job.body)


# -- stream --------------------------------------------------------------------------------------


class BeanstalkStream(HeldJobsReader[int]):
    """Reserves jobs of ``tube`` on the driver's connection (pipelined reserve-with-timeout 0,
    ``window`` in flight) and deletes them when their batch commits."""

    fmt = "beanstalk"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.max_jobs)
        self.settings = settings
        self.tube = settings.tube or "default"
        self._client: Client | None = None

    def _connection(self) -> Client:
        if self._client is None:
            client = self.settings.connect()
            client.watch(self.tube)
            if self.tube != "default":
                client.ignore("default")
            self._client = client
        return self._client

    def take(self, limit: int) -> list[tuple[int, tuple[Any, ...]]]:
        client = self._connection()
        taken: list[tuple[int, tuple[Any, ...]]] = []
        while len(taken) < limit:
            n = min(self.settings.window, limit - len(taken))
            try:
                replies = client.call_many([ReserveWithTimeout(0)] * n, window=n)
            except BulkError as exc:
                # The connection failed: the server gives back what it had reserved for us.
                raise exc.error from exc
            more = True
            for reply in replies:
                if isinstance(reply, Reserved):
                    taken.append((reply.job_id, (reply.job_id, self.tube, reply.body)))
                elif isinstance(reply, (TimedOut, DeadlineSoon)):
                    more = False  # nothing ready now, or a held job is about to time out
                elif isinstance(reply, JobwireError):
                    raise reply
            if not more:
                break
        return taken

    def ready(self) -> int:
        """``current-jobs-ready`` of the tube (0 when the tube does not exist)."""
        try:
            return int(self._connection().stats_tube(self.tube)["current-jobs-ready"])
        except NotFound:
            return 0

    def close(self) -> None:
        """Close the connection: beanstalkd gives back at once the jobs it still reserves."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def acknowledge(self, jobs: list[int]) -> None:
        client = self._client
        if client is None:
            return
        try:
            replies = client.call_many([Delete(job) for job in jobs], window=self.settings.window)
        except BulkError as exc:  # the connection failed part way
            logger.warning("beanstalk stream: connection lost after %d of %d deletes; the server "
                           "gave the other jobs back and they will be read again: %s",
                           len(exc.done), len(jobs), exc.error)
            client.close()
            self._client = None
            return
        except JobwireConnectionError as exc:
            logger.warning("beanstalk stream: connection lost before %d jobs were deleted; the "
                           "server gave them back and they will be read again: %s", len(jobs), exc)
            client.close()
            self._client = None
            return
        lost = sum(isinstance(r, NotFound) for r in replies)
        if lost:
            logger.warning("beanstalk stream: %d jobs were no longer reserved at commit (their "
                           "TTR ran out first): they may be delivered again", lost)
        for reply in replies:
            if isinstance(reply, JobwireError) and not isinstance(reply, NotFound):
                raise reply
