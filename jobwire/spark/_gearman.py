"""The ``gearman`` format: a background-job sink, the admin ``status`` and ``workers`` as
tables (one task per server), and :func:`gearman_call`, foreground jobs as a column."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from gearman_client import (
    DEFAULT_PORT,
    Admin,
    AsyncClient,
    BulkSubmitError,
    Client,
    Priority,
    check_name,
    check_unique,
)
from jobwire._url import Address, resolve_addresses
from jobwire.errors import BulkError, InvalidAddress, JobwireError

from ._common import (
    BadOption,
    BadRow,
    Caller,
    Column,
    Options,
    QueueWriter,
    Row,
    RowRefused,
    WriteReport,
    call_column,
    check_schema,
    chunks,
    iter_rows,
    refuse_overwrite,
    struct_of,
)

__all__ = ["GearmanDataSource", "gearman_call"]

TABLES = ("status", "workers")
PRIORITIES = tuple(p.value for p in Priority)


def _function(value: Any) -> str:
    data = value.encode() if isinstance(value, str) else value
    check_name(data, "function")
    return str(value)


def _unique(value: Any) -> bytes:
    data: bytes = value.encode() if isinstance(value, str) else value
    check_unique(data)
    return data


def _priority(value: Any) -> Priority:
    text = str(value).strip().lower()
    if text not in PRIORITIES:
        raise ValueError(f"must be one of {', '.join(PRIORITIES)}, got {value!r}")
    return Priority(text)


COLUMNS = (
    Column("function", "text", _function),
    Column("unique", "text", _unique),
    Column("priority", "text", _priority),
)


def _servers(opts: Options) -> list[Address]:
    url = opts.text("url")
    try:
        return resolve_addresses(url, scheme="gearman", default_port=DEFAULT_PORT)
    except (InvalidAddress, TypeError) as exc:
        raise opts.error("url", str(exc)) from None


@dataclass(frozen=True)
class Settings:
    """The parsed options (picklable: they travel to the executors)."""

    url: str
    function: str | None
    priority: Priority
    window: int
    timeout: float | None
    report_ids: int

    @classmethod
    def parse(cls, opts: Options) -> Settings:
        _servers(opts)
        return cls(
            url=opts.text("url"),
            function=opts.check("function", _function, None),
            priority=opts.check("priority", _priority, Priority.NORMAL),
            window=opts.integer("window", 512, 1, 65536),
            timeout=opts.seconds("timeout", 10.0),
            report_ids=opts.integer("reportIds", 1000, 0, 10_000_000),
        )


class GearmanDataSource(DataSource):
    """``format("gearman")``: see docs/spark.md for every option."""

    @classmethod
    def name(cls) -> str:
        return "gearman"

    def _opts(self) -> Options:
        return Options("gearman", self.options)

    def schema(self) -> StructType:
        return TABLE_SCHEMAS[self._opts().choice("table", TABLES)]

    def writer(self, schema: StructType, overwrite: bool) -> GearmanWriter:
        opts = self._opts()
        refuse_overwrite(opts, overwrite)
        body, columns = check_schema(opts, schema, COLUMNS)
        settings = Settings.parse(opts)
        if settings.function is None and not any(c.name == "function" for c in columns):
            raise opts.error("function", "is required (or a 'function' column)")
        return GearmanWriter(settings, body, columns).recording(opts)

    def reader(self, schema: StructType) -> GearmanTableReader:
        opts = self._opts()
        return GearmanTableReader(_servers(opts), opts.choice("table", TABLES),
                                  opts.seconds("timeout", 10.0))


# -- sink ----------------------------------------------------------------------------------------


class GearmanWriter(QueueWriter):
    """Each task: one client (one connection per server). Rows without a unique go out with
    ``submit_background_many`` (pipelined, ``window`` in flight, per run of one priority);
    rows with a unique one by one with ``submit_background``, to the server the unique picks."""

    fmt = "gearman"
    sent = "submitted"

    def __init__(self, settings: Settings, body: str, columns: tuple[Column, ...]) -> None:
        super().__init__(body, columns, settings.report_ids)
        self.settings = settings

    def send(self, batches: Iterator[Any], partition: int, report: WriteReport) -> None:
        with Client(self.settings.url, timeout=self.settings.timeout) as client:
            for chunk in chunks(iter_rows(batches, partition, self.body, self.columns)):
                self._submit_chunk(client, chunk, partition, report)

    def _submit_chunk(
        self, client: Client, chunk: list[Row], partition: int, report: WriteReport
    ) -> None:
        s = self.settings
        functions: list[str] = []
        for row in chunk:  # every row checked before any of the chunk is sent
            function = row.values.get("function") or s.function
            if function is None:
                raise BadRow(partition, row.index, "function",
                             "is null and no 'function' option is set")
            functions.append(function)
        run: list[tuple[Row, str]] = []
        run_priority = s.priority
        for row, function in zip(chunk, functions, strict=True):
            priority = row.values.get("priority") or s.priority
            unique = row.values.get("unique")
            if unique or priority is not run_priority:
                self._flush(client, run, run_priority, partition, report)
                run, run_priority = [], priority
            if not unique:
                run.append((row, function))
                continue
            try:
                handle = client.submit_background(function, row.body, unique=unique,
                                                  priority=priority)
            except JobwireError as exc:
                raise RowRefused(partition, row.index, exc) from exc
            report.add(function, handle.decode("ascii", "replace"))
        self._flush(client, run, run_priority, partition, report)

    def _flush(
        self, client: Client, run: list[tuple[Row, str]], priority: Priority, partition: int,
        report: WriteReport,
    ) -> None:
        if not run:
            return
        jobs = [(function, row.body) for row, function in run]
        try:
            outcomes: list[Any] = list(client.submit_background_many(
                jobs, priority=priority, window=self.settings.window))
        except (BulkSubmitError, BulkError) as exc:  # per job: its handle or its error
            outcomes = list(exc.results)
        failure: RowRefused | None = None
        for (row, function), outcome in zip(run, outcomes, strict=True):
            if isinstance(outcome, bytes):
                report.add(function, outcome.decode("ascii", "replace"))
            elif failure is None:
                failure = RowRefused(partition, row.index, outcome)
                failure.__cause__ = outcome
        run.clear()
        if failure is not None:
            raise failure


# -- tables --------------------------------------------------------------------------------------


TABLE_SCHEMAS: dict[str, StructType] = {
    "status": struct_of([("server", str), ("function", str), ("queued", int),
                         ("running", int), ("workers", int)]),
    "workers": struct_of([("server", str), ("fd", int), ("address", str), ("client_id", str),
                          ("functions", list)]),
}


class GearmanTableReader(DataSourceReader):
    """One task per server of ``url``: its admin ``status`` or ``workers`` answer."""

    def __init__(self, servers: list[Address], table: str, timeout: float | None) -> None:
        self.servers = servers
        self.table = table
        self.timeout = timeout

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(server) for server in self.servers]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        server: Address = partition.value
        with Admin(server, timeout=self.timeout) as admin:
            if self.table == "status":
                for s in admin.status():
                    yield (str(server), s.function, s.queued, s.running, s.workers)
            else:
                for w in admin.workers():
                    yield (str(server), w.fd, w.address, w.client_id, list(w.functions))


# -- request/reply -------------------------------------------------------------------------------


def gearman_call(
    df: DataFrame,
    function: str,
    input_col: str,
    *,
    url: str,
    output_col: str = "result",
    error_col: str = "error",
    concurrency: int = 64,
    priority: str = "normal",
    timeout: float | None = 60.0,
) -> DataFrame:
    """Run a foreground Gearman job per row: ``df`` plus ``output_col`` (binary, the
    WORK_COMPLETE data) and ``error_col`` (string: ``JobFailed: ...``, ``JobException: ...``,
    ``OperationTimeout: ...``, ``input is null``; null when the row has a result).

    Each task opens one client (one connection per server of ``url``) and keeps up to
    ``concurrency`` jobs in flight on it; a row's failure is its error cell, never the task's.
    ``timeout`` bounds each job. Runs on ``mapInArrow``.

    Raises:
        BadOption: a bad function name, priority, url, concurrency or column (on the driver,
            before anything is sent).
    """
    opts = Options("gearman_call", {"url": url})
    _servers(opts)
    try:
        _function(function)
        prio = _priority(priority)
    except ValueError as exc:
        raise BadOption(f"gearman_call: {exc}") from None
    if concurrency < 1:
        raise BadOption(f"gearman_call: concurrency must be >= 1, got {concurrency}")

    def caller() -> Caller[AsyncClient]:
        async def connect() -> AsyncClient:
            # exceptions=True: a worker's WORK_EXCEPTION reaches the row as JobException.
            return AsyncClient(url, timeout=timeout, exceptions=True)

        async def close(client: AsyncClient) -> None:
            await client.aclose()

        async def call(client: AsyncClient, data: bytes) -> bytes:
            return await client.submit(function, data, priority=prio)

        return Caller(connect, close, call, connections=1, per_connection=concurrency)

    return call_column(df, input_col, output_col, error_col, caller)
