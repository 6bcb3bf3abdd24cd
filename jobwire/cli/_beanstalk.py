"""``jobwire beanstalk ...``: commands for a beanstalkd server.

Every command opens one connection with :class:`beanstalk_client.Client` (so ``--url`` takes
every address form the client takes: ``beanstalk://host:port``, ``host:port``, ``host``,
``unix:///path``, a socket path), sends its commands, prints the result and closes. Bulk work
(``put -``, ``delete``, ``drain``, ``tubes``, ``top``) is pipelined on that connection.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

import click
from rich.table import Table

from jobwire.cli._app import (
    Failed,
    body_json,
    body_text,
    cell,
    console,
    json_mode,
    kv_table,
    numbered_lines,
    remaining_bytes,
    rows_table,
    shared_flags,
    show,
    tls_options,
    url_option,
)
from jobwire.cli._top import Column, Poll, run_top, top_options

ENV = "BEANSTALK_URL"
DEFAULT = "beanstalk://127.0.0.1:11300"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "beanstalkd server")

#: Unsigned 32-bit, beanstalkd's range for priorities, delays and TTRs.
_U32 = click.IntRange(0, 2**32 - 1)
#: Lines of ``put -`` sent per ``put_many`` (between two progress updates).
_BATCH = 1000
#: Reserves ``drain`` pipelines at once.
_WINDOW = 256
#: The columns of ``tubes`` and ``top``: (title, stats-tube key).
_TUBE_COLUMNS = (
    ("ready", "current-jobs-ready"),
    ("reserved", "current-jobs-reserved"),
    ("delayed", "current-jobs-delayed"),
    ("buried", "current-jobs-buried"),
    ("urgent", "current-jobs-urgent"),
    ("waiting", "current-waiting"),
)

if TYPE_CHECKING:  # the client loads on first use: --help stays fast
    from beanstalk_client import Client


@click.group(name="beanstalk")
@shared_flags
def group() -> None:
    """Commands for a beanstalkd server (--url or $BEANSTALK_URL)."""


def _connect(url: str) -> Client:
    """A connected client.

    Raises:
        InvalidAddress, TypeError: ``url`` is not a server address (exit 2).
        ConnectFailed: the server cannot be reached (exit 3).
    """
    from beanstalk_client import Client

    return Client(url, **tls_options())


def _stats_rows(client: Client, tubes: list[str]) -> list[dict[str, Any]]:
    """``stats-tube`` of every tube, pipelined; tubes that went away meanwhile are left out."""
    from beanstalk_client import Ok, StatsTube, parse_tube_stats

    if not tubes:
        return []
    replies = client.call_many([StatsTube(tube) for tube in tubes])
    return [dict(parse_tube_stats(r.data)) for r in replies if isinstance(r, Ok)]


@contextlib.contextmanager
def _not_found(what: str) -> Iterator[None]:
    """Turn the server's NOT_FOUND into a one-line ``NOT_FOUND: what`` (exit 1)."""
    from beanstalk_client import NotFound

    try:
        yield
    except NotFound as exc:
        raise Failed(f"NOT_FOUND: {what}") from exc


def _kv(data: Mapping[str, Any]) -> Table:
    """A key/value table of server data (markup in it shown as is)."""
    return kv_table({cell(str(k)): cell(str(v)) for k, v in data.items()})


# -- server and tubes -------------------------------------------------------------------------


@group.command(name="stats")
@common
def stats(url: str) -> None:
    """The server's statistics (stats)."""
    with _connect(url) as client:
        data = client.stats()
    show(dict(data), table=lambda: _kv(data))


@group.command(name="tubes")
@common
def tubes(url: str) -> None:
    """Every tube with its job counts (list-tubes, then stats-tube of each)."""
    with _connect(url) as client:
        rows = _stats_rows(client, client.list_tubes())
    columns = ["tube", *(title for title, _ in _TUBE_COLUMNS), "using", "watching", "total",
               "paused"]

    def table() -> Table:
        return rows_table(columns, [
            [cell(str(r["name"])), *(r[key] for _, key in _TUBE_COLUMNS), r["current-using"],
             r["current-watching"], r["total-jobs"], r["pause-time-left"]]
            for r in rows
        ])

    show(rows, table=table)


@group.command(name="stats-tube")
@click.argument("tube")
@common
def stats_tube(url: str, tube: str) -> None:
    """One tube's statistics (stats-tube TUBE); exit 1 if there is no such tube."""
    with _connect(url) as client, _not_found(f"no tube {tube}"):
        data = client.stats_tube(tube)
    show(dict(data), table=lambda: _kv(data))


# -- put --------------------------------------------------------------------------------------


def _put_lines(client: Client, stream: IO[bytes], priority: int, delay: int,
               ttr: int) -> list[int]:
    """Put one job per non-empty line of ``stream``, pipelined with ``put_many`` (in batches of
    :data:`_BATCH`; line by line as a person types them), with a progress bar on stderr when
    it is a terminal.

    Raises:
        Failed: the server refused a job (the message names its line and counts the jobs put;
            the rest of the batch was put, nothing after it is sent).
    """
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from beanstalk_client import BulkError

    err = console(stderr=True)
    progress = None
    if err.is_terminal and not json_mode():
        progress = Progress(SpinnerColumn(), TextColumn("put {task.fields[jobs]} jobs"),
                            BarColumn(), TimeElapsedColumn(), console=err, transient=True)
    total = remaining_bytes(stream)
    start = os.lseek(stream.fileno(), 0, os.SEEK_CUR) if total is not None else 0
    ids: list[int] = []
    with progress if progress is not None else contextlib.nullcontext():
        task = progress.add_task("put", total=total, jobs=0) if progress is not None else None
        for batch in numbered_lines(stream, _BATCH):
            bodies = [line for _, line in batch]
            try:
                ids += client.put_many(bodies, priority=priority, delay=delay, ttr=ttr)
            except BulkError as exc:
                done = [r for r in exc.results if isinstance(r, int)]
                ids += done
                raise Failed(
                    f"line {batch[exc.index][0]}: {exc.error}: {len(ids)} jobs put, "
                    f"{len(batch) - len(done)} refused; stopped"
                ) from exc
            if progress is not None and task is not None:
                read = os.lseek(stream.fileno(), 0, os.SEEK_CUR) - start if total else None
                progress.update(task, completed=read, jobs=len(ids))
    return ids


@group.command(name="put")
@click.argument("body", required=False)
@click.option("--file", "file", type=click.File("rb"), default=None,
              help="Put the whole file as one job ('-': all of stdin as one job).")
@click.option("--tube", "-t", default="default", show_default=True, help="The tube to put into.")
@click.option("--priority", "--pri", type=_U32, default=None,
              help="0 is the most urgent.  [default: 65536, the client's]")
@click.option("--delay", type=_U32, default=0, show_default=True,
              help="Seconds before the job is ready.")
@click.option("--ttr", type=_U32, default=None,
              help="Seconds a worker may hold the job.  [default: 60, the client's]")
@common
def put(url: str, body: str | None, file: IO[bytes] | None, tube: str, priority: int | None,
        delay: int, ttr: int | None) -> None:
    """Put a job: BODY as it is, the contents of --file, or with BODY '-' one job per
    non-empty line of stdin (pipelined, with a progress bar on a terminal)."""
    from beanstalk_client import DEFAULT_PRIORITY, DEFAULT_TTR

    if (body is None) == (file is None):
        raise click.UsageError("give BODY, '-' (one job per line of stdin) or --file")
    priority = DEFAULT_PRIORITY if priority is None else priority
    ttr = DEFAULT_TTR if ttr is None else ttr
    with _connect(url) as client:
        client.use(tube)
        if body == "-":
            ids = _put_lines(client, sys.stdin.buffer, priority, delay, ttr)
        else:
            data = file.read() if file is not None else os.fsencode(body or "")
            ids = [client.put(data, priority=priority, delay=delay, ttr=ttr)]
    if len(ids) == 1:
        text = f"put job {ids[0]} into tube {tube}"
    elif ids:
        text = f"put {len(ids)} jobs into tube {tube} (ids {ids[0]} to {ids[-1]})"
    else:
        text = f"put 0 jobs into tube {tube}"
    show({"tube": tube, "count": len(ids), "ids": ids}, text=text)


# -- jobs -------------------------------------------------------------------------------------


@group.command(name="peek")
@click.argument("which", metavar="ready|delayed|buried|ID")
@click.option("--tube", "-t", default="default", show_default=True,
              help="The tube of ready/delayed/buried.")
@common
def peek(url: str, which: str, tube: str) -> None:
    """Show a job without reserving it: the next ready, delayed or buried job of --tube, or the
    job ID; with its stats (stats-job). Exit 1 if there is none."""
    from beanstalk_client import NotFound

    if not which.isdigit() and which not in ("ready", "delayed", "buried"):
        raise click.BadParameter("ready, delayed, buried or a job id", param_hint="WHICH")
    with _connect(url) as client:
        if which.isdigit():
            with _not_found(f"no job {which}"):
                job = client.peek(int(which))
        else:
            client.use(tube)
            peeks = {"ready": client.peek_ready, "delayed": client.peek_delayed,
                     "buried": client.peek_buried}
            with _not_found(f"no {which} job in tube {tube}"):
                job = peeks[which]()
        try:
            job_stats: dict[str, Any] | None = dict(client.stats_job(job))
        except NotFound:  # deleted in between
            job_stats = None
    if json_mode():
        show({"id": job.id, **body_json(job.body), "stats": job_stats})
        return
    info = {"id": job.id, "bytes": len(job.body)}
    if job_stats is not None:
        info.update((k, v) for k, v in job_stats.items() if k != "id")
    console().print(_kv(info))
    click.echo(f"body: {body_text(job.body)}")


@group.command(name="kick")
@click.argument("bound", type=click.IntRange(1, 2**32 - 1))
@click.option("--tube", "-t", default="default", show_default=True, help="The tube to kick in.")
@common
def kick(url: str, bound: int, tube: str) -> None:
    """Make up to BOUND buried jobs of --tube ready (if it has none buried: delayed jobs)."""
    with _connect(url) as client:
        client.use(tube)
        count = client.kick(bound)
    show({"tube": tube, "kicked": count}, text=f"kicked {count} jobs in tube {tube}")


@group.command(name="kick-job")
@click.argument("job_id", metavar="ID", type=click.IntRange(0))
@common
def kick_job(url: str, job_id: int) -> None:
    """Make the buried or delayed job ID ready; exit 1 if it is neither."""
    with _connect(url) as client, _not_found(f"job {job_id} is not buried or delayed (or "
                                             "does not exist)"):
        client.kick_job(job_id)
    show({"kicked": job_id}, text=f"kicked job {job_id}")


@group.command(name="delete")
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True, type=click.IntRange(0))
@common
def delete(url: str, job_ids: tuple[int, ...]) -> None:
    """Delete jobs by id (pipelined); exit 1 if any was not found (the others are deleted)."""
    from beanstalk_client import BeanstalkError, Delete

    with _connect(url) as client:
        replies = client.call_many([Delete(i) for i in job_ids])
    pairs = list(zip(job_ids, replies, strict=True))
    deleted = [i for i, r in pairs if not isinstance(r, BeanstalkError)]
    missing = [i for i, r in pairs if isinstance(r, BeanstalkError)]
    if json_mode():
        show({"deleted": deleted, "not_found": missing})
    elif deleted:
        click.echo(f"deleted {len(deleted)} jobs: {' '.join(map(str, deleted))}")
    if missing:
        raise Failed(f"NOT_FOUND: {' '.join(map(str, missing))} (no such jobs, or reserved by "
                     f"another connection)")


@group.command(name="pause")
@click.argument("tube")
@click.argument("seconds", type=_U32)
@common
def pause(url: str, tube: str, seconds: int) -> None:
    """Hand out no jobs of TUBE for SECONDS (pause-tube; 0 ends a pause)."""
    with _connect(url) as client, _not_found(f"no tube {tube}"):
        client.pause_tube(tube, seconds)
    show({"tube": tube, "paused": seconds}, text=f"paused tube {tube} for {seconds} s")


def _drain(client: Client, tube: str, report: Callable[[int], None] | None = None) -> int:
    """Delete every ready, delayed and buried job of ``tube``; return how many. ``report`` is
    called with the count so far after each round (for the progress bar).

    Ready jobs first, in bulk: ``reserve-with-timeout 0`` pipelined :data:`_WINDOW` at a time
    on a connection that watches only ``tube``, then their deletes, until a round reserves
    fewer than it asked for (if the command dies in between, the server gives the jobs it
    held back as ready: nothing is lost but what was deleted). Then what a reserve cannot take
    (delayed and buried jobs, the ready jobs of a paused tube): each round sends the deletes
    of the jobs the last peeks found and the next ``peek-ready``, ``peek-delayed`` and
    ``peek-buried`` in one pipeline. A job a worker reserves meanwhile is not deleted
    (NOT_FOUND) and not peeked again; the loop ends when the peeks find nothing, or when a
    round deletes nothing and finds the same jobs again.
    """
    from beanstalk_client import (
        Command,
        Delete,
        Deleted,
        Found,
        PeekBuried,
        PeekDelayed,
        PeekReady,
        Reserved,
        ReserveWithTimeout,
    )

    client.use(tube)
    client.watch(tube)
    if tube != "default":
        client.ignore("default")
    deleted = 0
    while True:
        reserves: list[Command[Any]] = [ReserveWithTimeout(0)] * _WINDOW
        held = [r.job_id for r in client.call_many(reserves) if isinstance(r, Reserved)]
        if held:
            replies = client.call_many([Delete(i) for i in held])
            deleted += sum(isinstance(r, Deleted) for r in replies)
            if report is not None:
                report(deleted)
        if len(held) < _WINDOW:
            break
    found: list[int] = []
    while True:
        deletes: list[Command[Any]] = [Delete(i) for i in found]
        replies = client.call_many([*deletes, PeekReady(), PeekDelayed(), PeekBuried()])
        done = sum(isinstance(r, Deleted) for r in replies[: len(deletes)])
        deleted += done
        if done and report is not None:
            report(deleted)
        ids = sorted({r.job_id for r in replies[len(deletes):] if isinstance(r, Found)})
        if not ids or (found and not done and ids == found):
            return deleted
        found = ids


@group.command(name="drain")
@click.argument("tube")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@common
def drain(url: str, tube: str, yes: bool) -> None:
    """Delete every job of TUBE: ready, delayed and buried (reserved jobs stay with their
    workers). Asks first unless --yes; prints how many were deleted. On a terminal a progress
    bar on stderr counts the deleted jobs against the tube's count when the drain began."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from beanstalk_client import NotFound

    with _connect(url) as client:
        try:
            before = client.stats_tube(tube)
        except NotFound:
            show({"tube": tube, "deleted": 0, "reserved": 0},
                 text=f"deleted 0 jobs (there is no tube {tube})")
            return
        if not yes:
            click.confirm(
                f"Delete every job of tube {tube} (ready {before['current-jobs-ready']}, "
                f"delayed {before['current-jobs-delayed']}, buried "
                f"{before['current-jobs-buried']})?", abort=True, err=True)
        err = console(stderr=True)
        if err.is_terminal and not json_mode():
            total = (before["current-jobs-ready"] + before["current-jobs-delayed"]
                     + before["current-jobs-buried"])
            with Progress(SpinnerColumn(), TextColumn("deleted {task.completed:.0f} of "
                                                      "{task.total:.0f} jobs"),
                          BarColumn(), TimeElapsedColumn(), console=err,
                          transient=True) as progress:
                task = progress.add_task("drain", total=total)
                deleted = _drain(client, tube, lambda n: progress.update(
                    task, completed=n, refresh=True))
        else:
            deleted = _drain(client, tube)
        try:
            reserved = client.stats_tube(tube)["current-jobs-reserved"]
        except NotFound:  # empty and unused: beanstalkd dropped it
            reserved = 0
    text = f"deleted {deleted} jobs from tube {tube}"
    if reserved:
        text += f"; {reserved} reserved jobs left with their workers"
    show({"tube": tube, "deleted": deleted, "reserved": reserved}, text=text)


# -- top --------------------------------------------------------------------------------------


@group.command(name="top")
@top_options
@common
def top(url: str, interval: float, count: int | None) -> None:
    """A live table of the tubes (job counts, puts and deletes per second), redrawn every
    --interval seconds until Ctrl-C."""
    columns = [Column(title, key) for title, key in _TUBE_COLUMNS]
    columns += [Column("puts/s", "total-jobs", rate=True),
                Column("deletes/s", "cmd-delete", rate=True)]
    fields = [key for _, key in _TUBE_COLUMNS] + ["total-jobs", "cmd-delete"]
    with _connect(url) as client:

        raw = json_mode()

        def poll() -> Poll:
            rows = _stats_rows(client, client.list_tubes())
            return {(str(r["name"]) if raw else cell(str(r["name"]))):
                    {k: int(r[k]) for k in fields} for r in rows}

        run_top(cell(f"beanstalkd {client.address}"), "tube", columns, poll, interval, count)

