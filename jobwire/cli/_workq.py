"""``jobwire workq ...``: commands for a Workq server.

``inspect`` (server, queues, queue, job, jobs, scheduled-jobs), ``add`` (one job, or one job
per line of stdin, pipelined with ``add_many``), ``run`` (add and wait for the result) and
``top`` (the queues, live). Each opens one :class:`workq_client.Client` on ``--url``.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from jobwire.cli._app import (
    SERVER_SAID_NO,
    USAGE,
    Failed,
    body_json,
    body_text,
    cell,
    console,
    exit_code,
    json_mode,
    kv_table,
    numbered_lines,
    remaining_bytes,
    rows_table,
    show,
    tls_options,
    url_option,
    wait_or_alias,
)
from jobwire.cli._top import Column, Poll, run_top, top_options

ENV = "WORKQ_URL"
DEFAULT = "workq://127.0.0.1:9922"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "Workq server")

#: Lines of stdin sent per ``add_many`` call (the progress bar moves once per chunk).
CHUNK = 1000

#: How much of a payload a table shows.
SHOWN = 60

if TYPE_CHECKING:  # the client loads on first use, not when the command starts
    from workq_client import Client, JobInfo, QueueInfo


@click.group(name="workq")
def group() -> None:
    """Commands for a Workq server (--url or $WORKQ_URL)."""


def _connect(url: str) -> Client:
    """A client on ``url`` (connected: ``ConnectFailed`` ends the command with exit 3)."""
    from workq_client import Client

    return Client(url, **tls_options())


# -- how records are shown ------------------------------------------------------------------


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _state(job: JobInfo) -> str:
    return job.state.name if hasattr(job.state, "name") else str(job.state)


def _extra(extra: dict[str, bytes]) -> dict[str, str]:
    return {key: body_text(value) for key, value in extra.items()}


def _job_json(job: JobInfo) -> dict[str, Any]:
    return {
        "job_id": job.job_id, "name": job.name, "state": _state(job), "priority": job.priority,
        "ttr": job.ttr, "ttl": job.ttl, "attempts": job.attempts,
        "max_attempts": job.max_attempts, "fails": job.fails, "max_fails": job.max_fails,
        "created": _time(job.created), "time": _time(job.time),
        "payload_size": len(job.payload), **body_json(job.payload),
        **({"extra": _extra(job.extra)} if job.extra else {}),
    }


def _job_fields(job: JobInfo) -> dict[str, str]:
    fields = {
        "id": job.job_id, "name": cell(body_text(job.name.encode())), "state": _state(job),
        "priority": str(job.priority),
        "attempts": f"{job.attempts}/{job.max_attempts or 'unlimited'}",
        "fails": f"{job.fails}/{job.max_fails or 'unlimited'}",
        "ttr": _seconds(job.ttr), "ttl": _seconds(job.ttl), "created": _time(job.created) or "",
    }
    if job.time is not None:
        fields["time"] = _time(job.time) or ""
    fields["payload-size"] = str(len(job.payload))
    fields["payload"] = cell(body_text(job.payload))
    for key, value in job.extra.items():
        fields[cell(body_text(key.encode()))] = cell(body_text(value))
    return fields


def _queue_json(queue: QueueInfo) -> dict[str, Any]:
    return {"name": queue.name, "ready": queue.ready_len, "scheduled": queue.scheduled_len,
            **({"extra": _extra(queue.extra)} if queue.extra else {})}


def _jobs_table(jobs: list[JobInfo], title: str, limit: int, cursor: int) -> None:
    rows = [[job.job_id, _state(job), job.priority, job.attempts, _seconds(job.ttr),
             _time(job.time or job.created) or "", cell(body_text(job.payload, SHOWN))]
            for job in jobs]
    table = rows_table(["id", "state", "priority", "attempts", "ttr", "time", "payload"],
                       rows, title=title)
    table.columns[0].min_width = 36  # a whole id: it is what the other commands take
    if len(jobs) == limit:
        table.caption = f"more: --cursor {cursor + limit}"
    console().print(table)


# -- inspect --------------------------------------------------------------------------------


@group.group(name="inspect")
def inspect() -> None:
    """Look at the server, its queues and jobs (Workq's inspect command)."""


@inspect.command(name="server")
@common
def inspect_server(url: str) -> None:
    """Active clients, evicted jobs, start time."""
    with _connect(url) as client:
        info = client.inspect_server()
    data: dict[str, Any] = {"active_clients": info.active_clients,
                            "evicted_jobs": info.evicted_jobs, "started": _time(info.started)}
    if info.extra:
        data["extra"] = _extra(info.extra)
    shown = {"active-clients": info.active_clients, "evicted-jobs": info.evicted_jobs,
             "started": _time(info.started)}
    shown.update({cell(body_text(k.encode())): cell(body_text(v)) for k, v in info.extra.items()})
    show(data, table=lambda: kv_table(shown))


_cursor = click.option("--cursor", type=click.IntRange(min=0), default=0, show_default=True,
                       help="Skip this many records (Workq's cursor offset).")
_limit = click.option("--limit", type=click.IntRange(1, 100), default=100, show_default=True,
                      help="Show at most this many records.")


@inspect.command(name="queues")
@_cursor
@_limit
@common
def inspect_queues(url: str, cursor: int, limit: int) -> None:
    """The queues in alphabetical order, with their ready and scheduled jobs."""
    with _connect(url) as client:
        queues = client.inspect_queues(cursor, limit)

    def table() -> Any:
        t = rows_table(["queue", "ready", "scheduled"],
                       [[cell(body_text(q.name.encode())), q.ready_len, q.scheduled_len]
                        for q in queues])
        if len(queues) == limit:
            t.caption = f"more: --cursor {cursor + limit}"
        return t

    show([_queue_json(q) for q in queues], table=table)


@inspect.command(name="queue")
@click.argument("name")
@common
def inspect_queue(url: str, name: str) -> None:
    """One queue: its ready and scheduled jobs."""
    from workq_client import NotFound

    with _connect(url) as client:
        try:
            queue = client.inspect_queue(name)
        except NotFound:
            raise Failed(f"no queue {name!r}") from None
    data = _queue_json(queue)
    show(data, table=lambda: kv_table({"queue": cell(body_text(queue.name.encode())),
                                       "ready": queue.ready_len,
                                       "scheduled": queue.scheduled_len}))


@inspect.command(name="job")
@click.argument("job_id", metavar="ID")
@common
def inspect_job(url: str, job_id: str) -> None:
    """One job: its state, attempts, times and payload."""
    from workq_client import NotFound

    with _connect(url) as client:
        try:
            job = client.inspect_job(job_id)
        except NotFound:
            raise Failed(f"no job {job_id!r}") from None
    show(_job_json(job), table=lambda: kv_table(_job_fields(job)))


@inspect.command(name="jobs")
@click.argument("name")
@_cursor
@_limit
@common
def inspect_jobs(url: str, name: str, cursor: int, limit: int) -> None:
    """The ready jobs of queue NAME, in the order they will be leased."""
    from workq_client import NotFound

    with _connect(url) as client:
        try:
            jobs = client.inspect_jobs(name, cursor, limit)
        except NotFound:
            raise Failed(f"no queue {name!r}") from None
    if json_mode():
        show([_job_json(job) for job in jobs])
    else:
        _jobs_table(jobs, f"ready jobs of {name}", limit, cursor)


@inspect.command(name="scheduled-jobs")
@click.argument("name")
@_cursor
@_limit
@common
def inspect_scheduled_jobs(url: str, name: str, cursor: int, limit: int) -> None:
    """The jobs of queue NAME scheduled for later, soonest first."""
    from workq_client import NotFound

    with _connect(url) as client:
        try:
            jobs = client.inspect_scheduled_jobs(name, cursor, limit)
        except NotFound:
            raise Failed(f"no queue {name!r}") from None
    if json_mode():
        show([_job_json(job) for job in jobs])
    else:
        _jobs_table(jobs, f"scheduled jobs of {name}", limit, cursor)


# -- add, run -------------------------------------------------------------------------------


def _payload(value: str) -> bytes:
    """An argument as the bytes the shell passed (``-``: all of stdin)."""
    if value == "-":
        return sys.stdin.buffer.read()
    return os.fsencode(value)


def _add_lines(url: str, name: str, source: IO[bytes], ttr: float, ttl: float,
               priority: int) -> list[str]:
    """Pipeline one ``add`` per line of ``source``, CHUNK lines per ``add_many`` (each line
    as it is typed when ``source`` is a terminal), under a progress bar when stderr is a
    terminal. Stops at the first refused line: what was added before it is counted in the
    message."""
    from workq_client import MAX_PAYLOAD, BulkError

    ids: list[str] = []
    err = console(stderr=True)
    progress = Progress(
        TextColumn("adding to {task.fields[queue]}"), BarColumn(),
        TextColumn("{task.fields[jobs]} jobs"), TimeElapsedColumn(),
        console=err, transient=True, disable=json_mode() or not err.is_terminal,
    )
    with progress, _connect(url) as client:
        task = progress.add_task("add", total=remaining_bytes(source), queue=name, jobs=0)

        def send(chunk: list[tuple[int, bytes]]) -> None:
            try:
                ids.extend(client.add_many(name, [p for _, p in chunk], ttr=ttr, ttl=ttl,
                                           priority=priority))
            except BulkError as exc:
                number = chunk[exc.index][0] if exc.index is not None else chunk[0][0]
                raise Failed(f"line {number}: {type(exc.error).__name__}: {exc.error} "
                             f"({len(ids) + len(exc.done)} jobs added before it)",
                             exit_code(exc.error)) from exc
            progress.update(task, advance=sum(len(p) + 1 for _, p in chunk), jobs=len(ids))

        for chunk in numbered_lines(source, CHUNK):
            for i, (number, payload) in enumerate(chunk):
                if len(payload) > MAX_PAYLOAD:  # the lines before it go, as for a refusal
                    if i:
                        send(chunk[:i])
                    raise Failed(f"line {number}: a payload of {len(payload)} bytes is over "
                                 f"{MAX_PAYLOAD} ({len(ids)} jobs added before it)", USAGE)
            send(chunk)
    return ids


@group.command()
@click.argument("name")
@click.argument("payload", required=False)
@click.option("--file", "file", type=click.File("rb"), default=None,
              help="Add the whole file as one job ('-': all of stdin as one job).")
@click.option("--ttr", type=float, default=60.0, show_default=True,
              help="Seconds a worker has to finish the job.")
@click.option("--ttl", type=float, default=86400.0, show_default=True,
              help="Seconds the job and its result live.")
@click.option("--priority", type=int, default=0, show_default=True, help="Higher goes first.")
@click.option("--max-attempts", type=int, default=0, show_default=True,
              help="Leases before the job fails (0: unlimited; one job only).")
@click.option("--max-fails", type=int, default=0, show_default=True,
              help="Failures before the job is final (0: the first; one job only).")
@click.option("--id", "job_id", default=None, help="The job id (a UUIDv4; default a new one).")
@common
def add(url: str, name: str, payload: str | None, file: IO[bytes] | None, ttr: float,
        ttl: float, priority: int, max_attempts: int, max_fails: int,
        job_id: str | None) -> None:
    """Add a job with PAYLOAD (or the contents of --file) to queue NAME; print its id.

    PAYLOAD - adds one job per line of stdin (blank lines skipped, pipelined, with a progress
    bar on a terminal) and prints how many were added.
    """
    if (payload is None) == (file is None):
        raise click.UsageError("give PAYLOAD, - (one job per line of stdin) or --file FILE")
    if payload == "-":
        if job_id is not None or max_attempts or max_fails:
            raise click.UsageError("--id, --max-attempts and --max-fails go with one job, not "
                                   "with one job per line")
        ids = _add_lines(url, name, sys.stdin.buffer, ttr, ttl, priority)
        show({"name": name, "added": len(ids), "job_ids": ids},
             text=f"added {len(ids)} jobs to {name}")
        return
    data = file.read() if file is not None else os.fsencode(payload or "")
    with _connect(url) as client:
        added = client.add(name, data, ttr=ttr, ttl=ttl, priority=priority,
                           max_attempts=max_attempts, max_fails=max_fails, job_id=job_id)
    show({"job_id": added, "name": name}, text=added)


@group.command()
@click.argument("name")
@click.argument("payload")
@click.option("--ttr", type=float, default=60.0, show_default=True,
              help="Seconds the worker has to finish the job.")
@click.option("--wait", type=float, default=60.0, show_default=True,
              help="Seconds the server waits for a worker to take the job (the library's "
              "run(wait=)); running out exits 1 (timed out).")
@click.option("--timeout", "wait_alias", type=float, default=None,
              hidden=True)  # the old name of --wait
@click.option("--priority", type=int, default=0, show_default=True, help="Higher goes first.")
@click.option("--id", "job_id", default=None, help="The job id (a UUIDv4; default a new one).")
@common
def run(url: str, name: str, payload: str, ttr: float, wait: float,
        wait_alias: float | None, priority: int, job_id: str | None) -> int:
    """Add a job with PAYLOAD (- for stdin) to queue NAME, wait for its result and print it.

    A job the worker failed exits 1 with its error; no worker within --wait exits 1 (timed
    out: the server's TIMEOUT).
    """
    from workq_client import TimedOut

    seconds = wait_or_alias(wait, wait_alias)
    with _connect(url) as client:
        try:
            result = client.run(name, _payload(payload), ttr=ttr, wait=seconds,
                                priority=priority, job_id=job_id)
        except TimedOut:
            raise Failed(f"timed out: no result from queue {name!r}: no worker took the job "
                         f"within --wait {seconds:g} s, or it ran out of its TTR of {ttr:g} s"
                         ) from None
    if json_mode():
        show({"job_id": result.job_id, "success": result.success, **body_json(result.data)})
        return 0 if result.success else SERVER_SAID_NO
    if not result.success:
        raise Failed(f"job {result.job_id} failed: {body_text(result.data)}")
    click.echo(body_text(result.data))
    return 0


# -- top ------------------------------------------------------------------------------------


def _all_queues(client: Client) -> list[QueueInfo]:
    queues: list[QueueInfo] = []
    while True:
        page = client.inspect_queues(len(queues), 100)
        queues.extend(page)
        if len(page) < 100:
            return queues


@group.command()
@top_options
@common
def top(url: str, interval: float, count: int | None) -> None:
    """The queues, live: ready and scheduled jobs, and how fast each changes (per second)."""
    columns = [Column("ready", "ready"), Column("scheduled", "scheduled"),
               Column("ready/s", "ready", rate=True),
               Column("scheduled/s", "scheduled", rate=True)]
    with _connect(url) as client:

        def poll() -> Poll:
            raw = json_mode()
            return {(q.name if raw else cell(body_text(q.name.encode()))):
                    {"ready": q.ready_len, "scheduled": q.scheduled_len}
                    for q in _all_queues(client)}

        run_top(cell(f"workq {url}"), "queue", columns, poll, interval, count)
