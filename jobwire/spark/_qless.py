"""The ``qless`` format: a ``put`` sink, queues, jobs by state, failures and tracked jobs as
tables, and a queue as a stream (``pop`` on the driver, heartbeats while Spark works on the
batch, ``complete`` on commit).

Every call is one ``EVALSHA`` of the qless script through ``qless_client``: the sink and the
stream build the script calls themselves (:mod:`qless_client.script`) and send them pipelined
with its ``run_many``, so a task's rows, or a batch's completions, go out on one
connection with at most ``window`` unanswered.
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from jobwire.errors import (
    BulkError,
    InvalidAddress,
    JobwireConnectionError,
    JobwireError,
    LocalProtocolError,
    NotSent,
    OperationTimeout,
)
from qless_client import (
    Client,
    JobNotFound,
    LostLock,
    RedisError,
    WrongQueue,
    new_jid,
    parse_redis_address,
)
from qless_client import script as sc

from ._common import (
    BadOption,
    BadRow,
    Column,
    HeldJobsReader,
    Options,
    QueueWriter,
    RowRefused,
    WriteReport,
    int_in,
    logger,
    refuse_overwrite,
    seconds_value,
    struct_of,
)

__all__ = ["QlessDataSource"]

TABLES = ("queues", "jobs", "failed", "tracked")
#: The states ``table=jobs`` lists (``jobs <state> <queue>``; ``complete`` and ``failed`` are
#: not kept per queue by qless: see :class:`QlessTableReader`).
STATES = ("waiting", "running", "stalled", "scheduled", "depends", "recurring", "complete",
          "failed")
STREAM_SCHEMA = ("jid string, klass string, queue string, data string, priority long, "
                 "tags array<string>, retries long, remaining long")
#: Jids per ``jobs``/``failed`` page (the script takes any count; this bounds one reply).
PAGE = 1000
#: Priorities and retries are Lua numbers (doubles): integers beyond this lose precision.
INT_LIMIT = 2**53
DEFAULT_WINDOW = 512


# -- the sink's columns --------------------------------------------------------------------------


def _text(what: str) -> Callable[[Any], str]:
    """A converter to a qless name (queue, klass, jid, tag): printable, non-empty, unpadded."""

    def convert(value: Any) -> str:
        return sc.validate_name(value, what)

    return convert


def _names(what: str) -> Callable[[Any], list[str]]:
    """A converter of an ``array<string>`` value to a list of qless names."""

    def convert(value: Any) -> list[str]:
        if not isinstance(value, list):
            raise ValueError(f"must be a list of strings, got {value!r:.60}")
        for item in value:
            if item is None:
                raise ValueError(f"holds a null {what}")
            sc.validate_name(item, what)
        return list(value)

    return convert


@dataclass(frozen=True)
class ListColumn(Column):
    """An ``array<string>`` column (``tags``, ``depends``)."""

    def accepts(self, dtype: DataType) -> bool:
        return isinstance(dtype, ArrayType) and isinstance(dtype.elementType, StringType)


COLUMNS: tuple[Column, ...] = (
    Column("queue", "text", _text("queue name")),
    Column("klass", "text", _text("klass")),
    Column("jid", "text", _text("jid")),
    Column("priority", "int", int_in(-INT_LIMIT, INT_LIMIT)),
    Column("retries", "int", int_in(0, INT_LIMIT)),
    Column("delay", "number", seconds_value),
    ListColumn("tags", "list", _names("tag")),
    ListColumn("depends", "list", _names("jid")),
)

_LEAVES = (StringType, BooleanType, ByteType, ShortType, IntegerType, LongType, FloatType,
           DoubleType, DecimalType, DateType, TimestampType, TimestampNTZType, BinaryType,
           NullType)


def _json_type_error(dtype: DataType, path: str) -> str | None:
    """Why a ``data`` column of ``dtype`` cannot become JSON (None when it can)."""
    if isinstance(dtype, StructType):
        for f in dtype.fields:
            reason = _json_type_error(f.dataType, f"{path}.{f.name}")
            if reason:
                return reason
        return None
    if isinstance(dtype, ArrayType):
        return _json_type_error(dtype.elementType, f"{path}[]")
    if isinstance(dtype, MapType):
        return (_json_type_error(dtype.keyType, f"{path} keys")
                or _json_type_error(dtype.valueType, f"{path} values"))
    if isinstance(dtype, _LEAVES):
        return None
    return f"{path} is {dtype.simpleString()}, which has no JSON form"


def _json_leaf(value: Any) -> Any:
    """A leaf value of a struct/map/array ``data`` column as JSON takes it.

    Raises:
        ValueError: NaN or an infinity (JSON has none).
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"holds {value}, which JSON cannot carry")
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return value


def _json_converter(dtype: DataType) -> Callable[[Any], Any]:
    """How a value of ``dtype`` (as Arrow's ``to_pylist`` gives it) becomes a JSON value:
    structs and maps become objects, arrays lists."""
    if isinstance(dtype, StructType):
        fields = [(f.name, _json_converter(f.dataType)) for f in dtype.fields]
        return lambda v: None if v is None else {name: conv(v[name]) for name, conv in fields}
    if isinstance(dtype, ArrayType):
        item = _json_converter(dtype.elementType)
        return lambda v: None if v is None else [item(x) for x in v]
    if isinstance(dtype, MapType):
        value = _json_converter(dtype.valueType)
        return lambda v: None if v is None else {_json_key(k): value(x) for k, x in v}
    return _json_leaf


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    leaf = _json_leaf(key)
    return leaf if isinstance(leaf, str) else json.dumps(leaf)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_text(value: Any) -> str:
    """The JSON text of a ``data`` string (or UTF-8 binary) value, checked as qless checks it.

    Raises:
        ValueError: not UTF-8, not JSON (NaN and Infinity are not JSON either).
    """
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"is not UTF-8: {exc}") from None
    try:
        json.loads(value, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("is not JSON: nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"is not JSON: {exc}") from None
    return str(value)


def check_columns(opts: Options, schema: StructType) -> tuple[DataType, tuple[Column, ...]]:
    """The ``data`` column's type and the optional columns present.

    Raises:
        BadOption: no ``data`` column, one of a type without a JSON form, a column of the
            wrong type, an unknown column.
    """
    names = {f.name: f.dataType for f in schema.fields}
    if "data" not in names:
        raise BadOption("format 'qless': the DataFrame needs a 'data' column (a string holding "
                        f"JSON, or a struct, map or array); it has {', '.join(names) or 'none'}")
    data = names["data"]
    if not isinstance(data, (StringType, BinaryType, StructType, MapType, ArrayType)):
        raise BadOption("format 'qless': column 'data' must be a string holding JSON (or UTF-8 "
                        f"binary), a struct, a map or an array, not {data.simpleString()}")
    reason = _json_type_error(data, "data")
    if reason:
        raise BadOption(f"format 'qless': column 'data': {reason}")
    known = {c.name: c for c in COLUMNS}
    present = []
    for name, dtype in names.items():
        if name == "data":
            continue
        column = known.get(name)
        if column is None:
            raise BadOption(f"format 'qless': unknown column {name!r}; a row may have 'data' and "
                            f"{', '.join(known)} (select only those)")
        if not column.accepts(dtype):
            want = {"int": "an integer type", "number": "a number type", "text": "string",
                    "list": "array<string>"}
            raise BadOption(f"format 'qless': column {name!r} must be {want[column.kinds]}, "
                            f"not {dtype.simpleString()}")
        present.append(column)
    return data, tuple(present)


# -- options -------------------------------------------------------------------------------------


def _url(opts: Options) -> str:
    url = opts.text("url")
    try:
        parse_redis_address(url)
    except (InvalidAddress, LocalProtocolError, TypeError) as exc:
        raise opts.error("url", str(exc)) from None
    return url


@dataclass(frozen=True)
class Settings:
    """The parsed options (picklable: they travel to the executors)."""

    url: str
    queue: str | None
    klass: str | None
    priority: int | None
    retries: int | None
    delay: float
    tags: tuple[str, ...] | None
    window: int
    timeout: float | None
    max_jobs: int
    report_ids: int
    worker: str | None

    @classmethod
    def parse(cls, opts: Options) -> Settings:
        tags = opts.optional("tags")
        return cls(
            url=_url(opts),
            queue=opts.check("queue", _text("queue name"), None),
            klass=opts.check("klass", _text("klass"), None),
            priority=opts.check("priority", int_in(-INT_LIMIT, INT_LIMIT), None),
            retries=opts.check("retries", int_in(0, INT_LIMIT), None),
            delay=opts.check("delay", seconds_value, 0.0),
            tags=None if tags is None else tuple(opts.check(
                "tags",
                lambda v: [sc.validate_name(t.strip(), "tag") for t in v.split(",") if t.strip()],
                [])),
            window=opts.integer("window", DEFAULT_WINDOW, 1, 65536),
            timeout=opts.seconds("timeout", 10.0),
            max_jobs=opts.integer("maxJobsPerBatch", 1000, 1, 10_000_000),
            report_ids=opts.integer("reportIds", 1000, 0, 10_000_000),
            worker=opts.check("worker", _text("worker"), None),
        )

    def connect(self) -> Client:
        """A connected client (the constructor connects)."""
        return Client(self.url, worker_name=self.worker, timeout=self.timeout)


class QlessDataSource(DataSource):
    """``format("qless")``: see docs/spark.md for every option."""

    @classmethod
    def name(cls) -> str:
        return "qless"

    def _opts(self) -> Options:
        return Options("qless", self.options)

    def _table(self, opts: Options) -> str:
        table = opts.choice("table", TABLES)
        if opts.has("state") and table != "jobs":
            raise opts.error("state", "goes with table 'jobs'")
        if opts.has("group") and table != "failed":
            raise opts.error("group", "goes with table 'failed'")
        return table

    def schema(self) -> StructType | str:
        opts = self._opts()
        if not opts.has("table"):
            return STREAM_SCHEMA
        table = self._table(opts)
        if table == "queues":
            return QUEUES_SCHEMA
        if table == "failed" and not opts.has("group"):
            return GROUPS_SCHEMA
        return JOB_SCHEMA

    def writer(self, schema: StructType, overwrite: bool) -> QlessWriter:
        opts = self._opts()
        refuse_overwrite(opts, overwrite)
        data, columns = check_columns(opts, schema)
        settings = Settings.parse(opts)
        present = {c.name for c in columns}
        if settings.queue is None and "queue" not in present:
            raise opts.error("queue", "is required (or a 'queue' column)")
        if settings.klass is None and "klass" not in present:
            raise opts.error("klass", "is required (or a 'klass' column): the class a worker "
                             "runs the job with")
        return QlessWriter(settings, data, columns).recording(opts)

    def reader(self, schema: StructType) -> QlessTableReader:
        opts = self._opts()
        table = self._table(opts)
        state = opts.choice("state", STATES, "waiting")
        return QlessTableReader(Settings.parse(opts), table, state,
                                opts.check("group", _text("group"), None))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = self._opts()
        if opts.has("table"):
            raise opts.error("table", "a stream reads jobs: leave 'table' out")
        settings = Settings.parse(opts)
        if settings.queue is None:
            raise opts.error("queue", "is required: the queue to pop from")
        return QlessStream(settings, settings.queue).settling(opts)


# -- sink ----------------------------------------------------------------------------------------


class QlessWriter(QueueWriter):
    """Each task: one connection; its rows are checked a window (``window`` rows) at a time
    and each window is sent as pipelined ``put`` calls, every reply read before the next
    window. A bad row fails the task before anything of its window is sent."""

    fmt = "qless"
    sent = "put"

    def __init__(self, settings: Settings, data: DataType, columns: tuple[Column, ...]) -> None:
        super().__init__("data", columns, settings.report_ids)
        self.settings = settings
        self.data_type = data

    def send(self, batches: Iterator[Any], partition: int, report: WriteReport) -> None:
        s = self.settings
        with s.connect() as client:
            window: list[tuple[int, str, sc.ScriptCall[str]]] = []
            for put in self._puts(batches, partition, client):
                window.append(put)
                if len(window) >= s.window:
                    self._send(client, window, partition, report)
                    window = []
            if window:
                self._send(client, window, partition, report)

    def _puts(
        self, batches: Iterator[Any], partition: int, client: Client
    ) -> Iterator[tuple[int, str, sc.ScriptCall[str]]]:
        """Each row's ``put`` call: (row index, queue, call).

        Raises:
            BadRow: at the first row that cannot become a job.
        """
        structured = not isinstance(self.data_type, (StringType, BinaryType))
        to_json = _json_converter(self.data_type) if structured else None
        index = 0
        for batch in batches:
            datas = batch.column("data").to_pylist()
            values = {c.name: batch.column(c.name).to_pylist() for c in self.columns}
            for i, raw in enumerate(datas):
                if raw is None:
                    raise BadRow(partition, index, "data", "is null: every job needs data")
                try:
                    if to_json is None:
                        data = json_text(raw)
                    else:
                        data = json.dumps(to_json(raw), allow_nan=False, separators=(",", ":"))
                except ValueError as exc:
                    raise BadRow(partition, index, "data", str(exc)) from None
                v: dict[str, Any] = {}
                for c in self.columns:
                    value = values[c.name][i]
                    if value is None:
                        continue
                    try:
                        v[c.name] = c.convert(value)
                    except (ValueError, TypeError) as exc:  # LocalProtocolError is a ValueError
                        raise BadRow(partition, index, c.name, str(exc)) from None
                queue, call = self._put(v, data, partition, index, client)
                yield index, queue, call
                index += 1

    def _put(
        self, v: dict[str, Any], data: str, partition: int, index: int, client: Client
    ) -> tuple[str, sc.ScriptCall[str]]:
        s = self.settings
        queue = v.get("queue", s.queue)
        if queue is None:
            raise BadRow(partition, index, "queue", "is null and no 'queue' option is set")
        klass = v.get("klass", s.klass)
        if klass is None:
            raise BadRow(partition, index, "klass", "is null and no 'klass' option is set")
        jid = v.get("jid") or new_jid()
        delay = v.get("delay", s.delay)
        depends = v.get("depends")
        if depends:
            if delay:
                raise BadRow(partition, index, "depends",
                             f"a job waits for a delay ({delay} s) or for jobs, not both")
            if jid in depends:
                raise BadRow(partition, index, "depends", f"job {jid} cannot depend on itself")
        tags = v.get("tags", None if s.tags is None else list(s.tags))
        call = sc.put(client.clock(), queue, jid, klass, data, delay=delay,
                      priority=v.get("priority", s.priority), tags=tags,
                      retries=v.get("retries", s.retries), depends=depends)
        return queue, call

    def _send(
        self, client: Client, window: list[tuple[int, str, sc.ScriptCall[str]]],
        partition: int, report: WriteReport,
    ) -> None:
        """Send one window's puts pipelined and read every reply.

        Raises:
            RowRefused: the script refused a row (after every reply was read).
            JobwireError: the connection failed (what was answered landed; the rest may have).
        """
        try:
            jids = sc.run_many(client, [call for _, _, call in window], self.settings.window)
        except BulkError as exc:
            for (_, queue, _), outcome in zip(window, exc.results, strict=True):
                if isinstance(outcome, str):
                    report.add(queue, outcome)
            error = exc.error
            if isinstance(error, RedisError):
                raise RowRefused(partition, window[exc.index][0], error) from error
            raise error from exc
        for (_, queue, _), jid in zip(window, jids, strict=True):
            report.add(queue, jid)


# -- tables --------------------------------------------------------------------------------------


_JOB_FIELDS: list[tuple[str, Any]] = [
    ("jid", str), ("klass", str), ("state", str), ("queue", str), ("worker", str),
    ("priority", int), ("expires", datetime), ("retries", int), ("remaining", int),
    ("data", str), ("tags", list), ("tracked", bool), ("dependents", list),
    ("dependencies", list), ("failure_group", str), ("failure_message", str),
    ("failure_when", datetime), ("failure_worker", str), ("history", str),
]
JOB_SCHEMA = struct_of(_JOB_FIELDS)
QUEUES_SCHEMA = struct_of([("name", str), ("waiting", int), ("running", int), ("stalled", int),
                           ("scheduled", int), ("depends", int), ("recurring", int)])
GROUPS_SCHEMA = struct_of([("group", str), ("count", int)])
_QUEUE_COUNTS = ("name", "waiting", "running", "stalled", "scheduled", "depends", "recurring")


def _when(value: Any) -> datetime | None:
    return datetime.fromtimestamp(float(value), timezone.utc) if value else None


def job_row(job: Mapping[str, Any]) -> tuple[Any, ...]:
    """A job as the script describes it (``get``, ``pop``, ``failed``, ``track``) as a row of
    :data:`JOB_SCHEMA`."""
    failure = job.get("failure") or {}
    return (
        job["jid"], job["klass"], job["state"], job.get("queue") or None,
        job.get("worker") or None, int(job["priority"]), _when(job.get("expires")),
        int(job["retries"]), int(job["remaining"]), job["data"], list(job.get("tags") or ()),
        bool(job.get("tracked")), list(job.get("dependents") or ()),
        list(job.get("dependencies") or ()), failure.get("group"), failure.get("message"),
        _when(failure.get("when")), failure.get("worker"),
        json.dumps(job.get("history") or [], separators=(",", ":")),
    )


def _template_row(recur: Mapping[str, Any]) -> tuple[Any, ...]:
    """A recurring template (``recur.get``) as a job row: what the two share, the rest null."""
    return (recur["jid"], recur["klass"], recur.get("state") or "recur", recur.get("queue"),
            None, int(recur["priority"]), None, int(recur["retries"]), None, recur["data"],
            list(recur.get("tags") or ()), False, [], [], None, None, None, None, "[]")


class QlessTableReader(DataSourceReader):
    """One task, one connection:

    * ``queues``: ``queues`` (every known queue with its counts).
    * ``jobs``: the jids of ``state`` in ``queue`` (every queue when not given), page by page
      (``jobs <state> <queue>``), each described by ``get`` (pipelined). ``recurring`` lists
      the templates (``recur.get``). ``complete`` pages ``jobs complete`` (every queue, newest
      first) and keeps, when ``queue`` is given, the jobs whose last stage was in it;
      ``failed`` reads every failure group and keeps the jobs of ``queue`` (or all).
    * ``failed``: ``failed`` (each group and its count), or with ``group`` the group's jobs,
      newest first (``failed <group>``, page by page).
    * ``tracked``: ``track``; a tracked jid whose job is gone is a row with only ``jid``.
    """

    def __init__(self, settings: Settings, table: str, state: str, group: str | None) -> None:
        self.settings = settings
        self.table = table
        self.state = state
        self.group = group

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        with self.settings.connect() as client:
            if self.table == "queues":
                for counts in sc.run(client, sc.queues(client.clock())):
                    yield tuple(counts[k] for k in _QUEUE_COUNTS)  # type: ignore[literal-required]
            elif self.table == "failed":
                if self.group is not None:
                    yield from map(job_row, self._failed(client, self.group))
                    return
                for group, count in sc.run(client, sc.failed_counts(client.clock())).items():
                    yield (group, int(count))
            elif self.table == "tracked":
                tracked = sc.run(client, sc.tracked(client.clock()))
                yield from map(job_row, tracked["jobs"])
                for jid in tracked["expired"]:
                    yield (jid, *([None] * (len(_JOB_FIELDS) - 1)))
            else:
                yield from self._jobs(client)

    def _jobs(self, client: Client) -> Iterator[tuple[Any, ...]]:
        queue, state = self.settings.queue, self.state
        if state == "failed":
            groups = sc.run(client, sc.failed_counts(client.clock()))
            for group in groups:
                for failed in self._failed(client, group):
                    if queue is None or failed.get("queue") == queue:
                        yield job_row(failed)
            return
        if state == "complete":
            for job in self._described(client, self._pages(client, "complete", None)):
                puts = [e for e in job.get("history") or () if e.get("q")]
                if queue is None or (puts and puts[-1].get("q") == queue):
                    yield job_row(job)
            return
        queues = [queue] if queue is not None else [
            q["name"] for q in sc.run(client, sc.queues(client.clock()))]
        if state == "waiting":
            # qless-core's ``jobs`` lists no waiting jobs: ``peek`` (in pop order; it lists
            # stalled jobs first, left out here, and puts due scheduled and recurring jobs in)
            for name in queues:
                counts = sc.run(client, sc.queue(client.clock(), name))
                want = counts["waiting"] + counts["stalled"]
                if want:
                    for job in sc.run(client, sc.peek(client.clock(), name, want)):
                        if job["state"] == "waiting":
                            yield job_row(job)
            return
        for name in queues:
            jids = self._pages(client, state, name)
            if state == "recurring":
                for page in _batched(jids, self.settings.window):
                    calls = [sc.recur_get(client.clock(), jid) for jid in page]
                    for template in sc.run_many(client, calls, self.settings.window):
                        if template is not None:  # unrecurred meanwhile
                            yield _template_row(template)
            else:
                yield from map(job_row, self._described(client, jids))

    def _pages(self, client: Client, state: str, queue: str | None) -> Iterator[str]:
        offset = 0
        while True:
            page = sc.run(client, sc.jobs(client.clock(), state, queue, offset, PAGE))
            yield from page
            if len(page) < PAGE:
                return
            offset += PAGE

    def _described(self, client: Client, jids: Iterator[str]) -> Iterator[sc.JobData]:
        """``get`` of each jid, pipelined; jobs gone meanwhile are skipped."""
        for page in _batched(jids, self.settings.window):
            calls = [sc.get(client.clock(), jid) for jid in page]
            for job in sc.run_many(client, calls, self.settings.window):
                if job is not None:
                    yield job

    @staticmethod
    def _failed(client: Client, group: str) -> Iterator[sc.JobData]:
        """The jobs of failure ``group``, newest first: ``failed <group>`` pages of jids
        (qless-core's ``limit`` is the page's end), each page described by ``multiget``."""
        offset = 0
        while True:
            page = sc.run(client, sc.failed(client.clock(), group, offset, offset + PAGE))
            if page["jobs"]:
                yield from sc.run(client, sc.multiget(client.clock(), *page["jobs"]))
            if len(page["jobs"]) < PAGE:
                return
            offset += PAGE


def _batched(items: Iterator[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# -- stream --------------------------------------------------------------------------------------


@dataclass
class _Held:
    """A popped job the stream holds until its batch commits."""

    queue: str
    data: str
    expires: float
    #: When the heartbeat thread renews the lock (half of the time left at the last renewal).
    renew_at: float
    #: A heartbeat found the lock lost: the job is someone else's now; never complete it.
    lost: bool = False


class QlessStream(HeldJobsReader[str]):
    """Pops jobs of ``queue`` on the driver (``pop`` of up to ``maxJobsPerBatch``, until the
    queue has none), holds them while Spark processes their batch, renewing their locks from a
    background thread (``heartbeat`` when half of a lock's time is left), and completes them
    (pipelined ``complete`` with their data unchanged) when the batch commits.

    A driver that dies stops heartbeating: the jobs' locks run out (``<queue>-heartbeat``
    seconds, ``heartbeat`` by default: 60) and, after qless-core's ``grace-period``, a
    ``pop`` hands them out again, counting one retry each.
    """

    fmt = "qless"

    def __init__(self, settings: Settings, queue: str) -> None:
        super().__init__(settings.max_jobs)
        self.settings = settings
        self.queue = queue
        self._client: Client | None = None
        # Made with the connection, not here: Spark pickles reader objects, and a lock or a
        # thread cannot be pickled.
        self._lock: Any = None
        self._wake: Any = None
        self._jobs: dict[str, _Held] = {}

    def _connection(self) -> Client:
        """The driver's client, and the heartbeat thread, made on first use. Call it holding
        nothing; use the client only under ``self._lock`` (a client is for one thread)."""
        if self._client is None:
            self._lock = threading.Lock()
            self._wake = threading.Event()
            self._client = self.settings.connect()
            threading.Thread(target=self._heartbeats, name="jobwire-qless-heartbeat",
                             daemon=True).start()
        return self._client

    def take(self, limit: int) -> list[tuple[str, tuple[Any, ...]]]:
        client = self._connection()
        queue = self.queue
        taken: list[tuple[str, tuple[Any, ...]]] = []
        with self._lock:
            while len(taken) < limit:
                want = min(limit - len(taken), PAGE)
                now = client.clock()
                jobs = sc.run(client, sc.pop(now, queue, client.worker_name, want))
                for job in jobs:
                    expires = float(job["expires"])
                    self._jobs[job["jid"]] = _Held(job["queue"] or queue, job["data"], expires,
                                                   now + (expires - now) / 2)
                    taken.append((job["jid"], (
                        job["jid"], job["klass"], job["queue"], job["data"],
                        int(job["priority"]), list(job["tags"]), int(job["retries"]),
                        int(job["remaining"]))))
                if len(jobs) < want:
                    break
        if taken:
            self._wake.set()
        return taken

    def acknowledge(self, jobs: list[str]) -> None:
        client = self._connection()
        with self._lock:
            held = [(jid, self._jobs.pop(jid)) for jid in jobs if jid in self._jobs]
            todo = [(jid, h) for jid, h in held if not h.lost]
            lost = len(held) - len(todo)
            calls = [sc.complete(client.clock(), jid, client.worker_name, h.queue, h.data)
                     for jid, h in todo]
            outcomes: list[object] = []
            try:
                states = sc.run_many(client, calls, self.settings.window) if calls else []
                outcomes.extend(states)
            except BulkError as exc:
                outcomes.extend(exc.results)
        refused = [o for o in outcomes if isinstance(o, (LostLock, JobNotFound, WrongQueue))]
        unsent = [o for o in outcomes
                  if isinstance(o, (JobwireConnectionError, OperationTimeout, NotSent))]
        other = [o for o in outcomes if isinstance(o, BaseException)
                 and not any(o is r for r in (*refused, *unsent))]
        if lost or refused:
            logger.warning(
                "qless stream: %d jobs could not be completed at commit (their lock ran out, or "
                "they were moved, failed or cancelled meanwhile): they may be delivered again%s",
                lost + len(refused), f"; first: {refused[0]}" if refused else "")
        if unsent:
            logger.warning("qless stream: %d jobs not completed (connection lost): they come "
                           "back when their lock runs out; first: %s", len(unsent), unsent[0])
        if other:  # not an outcome a late complete can have: a bug or a broken server
            raise other[0]

    # -- heartbeats (a thread of the driver's stream process) ------------------------------------

    def _heartbeats(self) -> None:
        """Renew every held job's lock when half of its time is left, until the process ends
        (daemon thread)."""
        while True:
            with self._lock:
                due = min((h.renew_at for h in self._jobs.values() if not h.lost), default=None)
            now = time.time()
            if due is None or due > now:
                self._wake.wait(None if due is None else due - now)
                self._wake.clear()
                continue
            try:
                self._renew()
            except Exception as exc:  # never let the thread die: the next round retries
                logger.warning("qless stream: heartbeats failed (retried in 0.5 s): %s", exc)
                time.sleep(0.5)

    def _renew(self) -> None:
        client = self._connection()
        with self._lock:
            now = client.clock()
            due = [(jid, h) for jid, h in self._jobs.items() if not h.lost and h.renew_at <= now]
            if not due:
                return
            calls = [sc.heartbeat(now, jid, client.worker_name) for jid, _ in due]
            outcomes: list[object] = []
            try:
                expiries = sc.run_many(client, calls, self.settings.window)
                outcomes.extend(expiries)
            except BulkError as exc:
                outcomes.extend(exc.results)
            lost: list[BaseException] = []
            for (_, held), outcome in zip(due, outcomes, strict=True):
                if isinstance(outcome, float):
                    held.expires = outcome
                    held.renew_at = now + (outcome - now) / 2
                elif isinstance(outcome, (LostLock, JobNotFound)):
                    held.lost = True
                    lost.append(outcome)
                else:  # a lost connection: try again soon (the client reconnects)
                    held.renew_at = now + min(0.2, max(0.0, (held.expires - now) / 4))
        if lost:
            logger.warning("qless stream: %d held jobs lost their lock before their batch "
                           "committed (they will be delivered again); first: %s", len(lost),
                           lost[0])
        errors = [o for o in outcomes if isinstance(o, JobwireError)
                  and not isinstance(o, (LostLock, JobNotFound))]
        if errors:
            logger.warning("qless stream: %d heartbeats failed: %s", len(errors), errors[0])
