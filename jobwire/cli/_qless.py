"""``jobwire qless ...``: commands for a Redis server holding qless.

``queues``, ``jobs``, ``get``, ``failed``, ``retry``, ``unfail``, ``config get|set|unset``,
``put`` and ``top`` (the queues, live). Each opens one :class:`qless_client.Client` on
``--url``; every call is one run of the qless script (``qless_client/lua/qless.lua``).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import click

from jobwire.cli._app import (
    Failed,
    body_text,
    cell,
    json_mode,
    kv_table,
    rows_table,
    show,
    tls_options,
    url_option,
)
from jobwire.cli._top import Column, Poll, run_top, top_options

if TYPE_CHECKING:  # the client loads on first use, not when the command starts
    from qless_client import Client, Job

ENV = "QLESS_URL"
DEFAULT = "redis://127.0.0.1:6379/0"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "Redis server holding qless")

#: How much of a job's data or failure message a table shows.
SHOWN = 60

#: The states ``jobs`` lists (``complete`` across queues, the others of one queue).
STATES = ("waiting", "running", "stalled", "scheduled", "depends", "recurring", "complete")


@click.group(name="qless")
def group() -> None:
    """Commands for a Redis server holding qless (--url or $QLESS_URL)."""


def _connect(url: str) -> Client:
    """A client on ``url``, to use in a ``with`` (which connects: ``ConnectFailed`` ends the
    command with exit 3; a bad address is ``InvalidAddress``, exit 2)."""
    from qless_client import Client

    return Client(url, **tls_options())


# -- how jobs are shown ---------------------------------------------------------------------


def _plain(value: object, limit: int | None = None) -> str:
    """A string from Redis (or the command line) for a terminal: control characters
    escaped."""
    return body_text(str(value).encode("utf-8", "surrogatepass"), limit)


def _text(value: object, limit: int | None = None) -> str:
    """:func:`_plain`, for a rich table (markup escaped too)."""
    return cell(_plain(value, limit))


def _time(value: float | datetime | None) -> str | None:
    if value is None or value == 0:
        return None
    if not isinstance(value, datetime):
        value = datetime.fromtimestamp(value, timezone.utc)
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _data(value: Any, limit: int | None = None) -> str:
    """Job data as compact JSON for a table. JSON escapes C0 controls itself; DEL and the C1
    controls (which a terminal may act on) get ``\\u`` escapes too, so the text stays JSON."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = "".join(f"\\u{ord(ch):04x}" if 0x7F <= ord(ch) < 0xA0 else ch for ch in text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    return cell(text)


def _job_json(job: Job) -> dict[str, Any]:
    return {
        "jid": job.jid, "klass": job.klass, "state": job.state, "queue": job.queue,
        "worker": job.worker, "priority": job.priority, "retries": job.retries,
        "remaining": job.remaining, "expires": _time(job.expires), "tags": job.tags,
        "tracked": job.tracked, "data": job.data, "failure": job.failure,
        "dependencies": job.dependencies, "dependents": job.dependents,
        "history": job.history,
    }


def _event(entry: Any) -> str:
    """One history event: ``<when> <what> [in <q>] [by <worker>] [<group>]``."""
    when = entry.get("when")
    shown = _time(when) if isinstance(when, (int, float)) else None
    parts = [shown or "?", _text(entry.get("what"))]
    if entry.get("q"):
        parts.append(f"in {_text(entry['q'])}")
    if entry.get("worker"):
        parts.append(f"by {_text(entry['worker'])}")
    if entry.get("group"):
        parts.append(_text(entry["group"]))
    return " ".join(parts)


def _job_fields(job: Job) -> dict[str, str]:
    fields = {
        "jid": _text(job.jid), "klass": _text(job.klass), "state": job.state,
        "queue": _text(job.queue or ""), "worker": _text(job.worker),
        "priority": str(job.priority), "retries": f"{job.remaining} of {job.retries} left",
        "expires": _time(job.expires) or "", "tags": _text(", ".join(job.tags)),
        "tracked": "yes" if job.tracked else "no",
        "dependencies": _text(", ".join(job.dependencies)),
        "dependents": _text(", ".join(job.dependents)),
    }
    if job.failure:
        fields["failure"] = (f"{_text(job.failure['group'])} at {_time(job.failure['when'])} "
                             f"by {_text(job.failure['worker'])}")
        fields["message"] = _text(job.failure["message"])
    fields["data"] = _data(job.data)
    fields["history"] = "\n".join(_event(entry) for entry in job.history)
    return fields


# -- reading --------------------------------------------------------------------------------


@group.command()
@common
def queues(url: str) -> None:
    """Every queue with its jobs by state (in the order the queues were first seen)."""
    with _connect(url) as client:
        counts = client.queues()
    show(counts, table=lambda: rows_table(
        ["queue", "waiting", "running", "stalled", "scheduled", "depends", "recurring",
         "paused"],
        [[_text(q["name"]), q["waiting"], q["running"], q["stalled"], q["scheduled"],
          q["depends"], q["recurring"], "yes" if q["paused"] else ""] for q in counts]))


@group.command()
@click.argument("state", type=click.Choice([*STATES, "completed"]))
@click.argument("queue", required=False)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="Skip this many jobs.")
@click.option("--count", type=click.IntRange(min=1), default=25, show_default=True,
              help="List at most this many jobs.")
@common
def jobs(url: str, state: str, queue: str | None, offset: int, count: int) -> None:
    """The jids of QUEUE in STATE, one per line (complete: of every queue, newest first;
    waiting: in the order pop hands them out, which, as qless-core's peek, first moves due
    scheduled and recurring jobs into the queue)."""
    state = "complete" if state == "completed" else state
    if state == "complete" and queue is not None:
        raise click.UsageError("complete jobs are listed across queues: give no QUEUE")
    if state != "complete" and queue is None:
        raise click.UsageError(f"{state} jobs are listed per queue: give a QUEUE")
    with _connect(url) as client:
        if queue is None:
            jids = client.completed(offset, count)
        elif state == "waiting":
            # qless-core's ``jobs`` has no waiting state: peek (which lists stalled jobs first)
            target = client.queue(queue)
            ahead = target.counts()["stalled"]
            peeked = target.peek(offset + count + ahead)
            jids = [job.jid for job in peeked if job.state == "waiting"][offset:offset + count]
        else:
            jids = client.queue(queue).jobs(state, offset, count)
    if jids or json_mode():
        show(jids, text="\n".join(_plain(jid) for jid in jids))


@group.command()
@click.argument("jid")
@common
def get(url: str, jid: str) -> None:
    """One job: its state, queue, worker, data, failure and history."""
    with _connect(url) as client:
        job = client.get(jid)
    if job is None:
        raise Failed(f"no job {jid!r}")
    show(_job_json(job), table=lambda: kv_table(_job_fields(job)))


@group.command()
@click.argument("group_", metavar="[GROUP]", required=False)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="Skip this many jobs of GROUP.")
@click.option("--count", type=click.IntRange(min=1), default=25, show_default=True,
              help="List at most this many jobs of GROUP.")
@common
def failed(url: str, group_: str | None, offset: int, count: int) -> None:
    """Failed jobs: how many in each failure group, or the jobs of GROUP (newest first)."""
    with _connect(url) as client:
        if group_ is None:
            counts = client.failed()
            show(counts, table=lambda: rows_table(
                ["group", "jobs"], [[_text(g), n] for g, n in sorted(counts.items())]))
            return
        total, page = client.failed_jobs(group_, offset, count)

    def table() -> Any:
        rows = [[_text(job.jid), _text(job.klass), _text(job.queue or ""),
                 _text(job.failure["worker"] if job.failure else ""),
                 _time(job.failure["when"]) if job.failure else "",
                 _text(job.failure["message"] if job.failure else "", SHOWN)] for job in page]
        t = rows_table(["jid", "klass", "queue", "worker", "failed", "message"], rows,
                       title=f"{_text(group_)}: {total} failed")
        t.columns[0].no_wrap = True
        return t

    show({"group": group_, "total": total, "jobs": [_job_json(job) for job in page]},
         table=table)


# -- changing -------------------------------------------------------------------------------


@group.command()
@click.argument("jids", metavar="JID...", nargs=-1, required=True)
@click.option("--queue", default=None, help="Put the jobs into this queue (default: their own).")
@click.option("--delay", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds before the jobs may be popped.")
@common
def retry(url: str, jids: tuple[str, ...], queue: str | None, delay: float) -> None:
    """Put failed jobs back into their queue (or --queue), keeping their data, priority, tags
    and retries. Every JID must be a failed job; none is moved otherwise."""
    moved: list[dict[str, str]] = []
    with _connect(url) as client:
        found = []
        for jid in jids:
            job = client.get(jid)
            if job is None:
                raise Failed(f"no job {jid!r}")
            if job.state != "failed":
                raise Failed(f"job {job.jid} is {job.state}, not failed")
            target = queue or job.queue
            if target is None:
                raise Failed(f"job {job.jid} has no queue: give --queue")
            found.append((job, target))
        for job, target in found:
            job.move(target, delay=delay)
            moved.append({"jid": job.jid, "queue": target})
    show(moved, text="\n".join(f"{m['jid']} -> {_plain(m['queue'])}" for m in moved))


@group.command()
@click.argument("group_", metavar="GROUP")
@click.argument("queue")
@click.option("--count", type=click.IntRange(min=1), default=25, show_default=True,
              help="Move at most this many jobs (the oldest failures first).")
@common
def unfail(url: str, group_: str, queue: str, count: int) -> None:
    """Put the jobs of failure GROUP back into QUEUE."""
    with _connect(url) as client:
        moved = client.unfail(queue, group_, count)
    show({"group": group_, "queue": queue, "moved": moved},
         text=f"{moved} jobs moved from {_plain(group_)} to {_plain(queue)}")


@group.command()
@click.argument("queue")
@click.argument("klass")
@click.argument("data")
@click.option("--jid", default=None, help="The job id (default: a new one).")
@click.option("--priority", type=int, default=None,
              help="Higher is popped sooner (default 0).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeat for more).")
@click.option("--delay", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds before the job may be popped.")
@click.option("--retries", type=click.IntRange(min=0), default=None,
              help="Retries before the job fails by itself (default 5).")
@click.option("--depends", multiple=True, help="A jid that must complete first (repeat).")
@common
def put(url: str, queue: str, klass: str, data: str, jid: str | None, priority: int | None,
        tags: tuple[str, ...], delay: float, retries: int | None,
        depends: tuple[str, ...]) -> None:
    """Put a job of class KLASS with JSON DATA (- for stdin) into QUEUE; print its jid."""
    text = sys.stdin.read() if data == "-" else data
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="DATA") from None
    with _connect(url) as client:
        added = client.queue(queue).put(
            klass, value, jid=jid, priority=priority, tags=list(tags) or None, delay=delay,
            retries=retries, depends=list(depends) or None,
        )
    show({"jid": added, "queue": queue}, text=_plain(added))


@group.command()
@click.option("--dry-run", is_flag=True, help="Count what would change; write nothing.")
@common
def migrate(url: str, dry_run: bool) -> None:
    """Move data written by jobwire's first qless script to qless-core's layout (stop every
    worker first; running it again changes nothing). Prints what changed, by kind."""
    from dataclasses import asdict

    from qless_client.migrate import migrate as run

    report = asdict(run(url, dry_run=dry_run))
    show(report, table=lambda: kv_table({k.replace("_", " "): v for k, v in report.items()},
                                        title="would change" if dry_run else "changed"))


# -- config ---------------------------------------------------------------------------------


@group.group()
def config() -> None:
    """qless options (heartbeat, jobs-history, ...): get, set, unset."""


@config.command(name="get")
@click.argument("key", required=False)
@common
def config_get(url: str, key: str | None) -> None:
    """Every option with its value (defaults included), or the value of KEY."""
    with _connect(url) as client:
        if key is None:
            options = client.config()
            show(options, table=lambda: kv_table(
                {_text(k): _text(v) for k, v in sorted(options.items())}))
            return
        value = client.config_get(key)
    if value is None:
        raise Failed(f"option {key!r} is not set and has no default")
    show({key: value}, text=_plain(value))


@config.command(name="set")
@click.argument("key")
@click.argument("value")
@common
def config_set(url: str, key: str, value: str) -> None:
    """Set option KEY to VALUE (qless' own options are numbers; per queue:
    QUEUE-heartbeat, QUEUE-max-concurrency)."""
    with _connect(url) as client:
        client.config_set(key, value)
    show({key: value}, text=f"{_plain(key)} = {_plain(value)}")


@config.command(name="unset")
@click.argument("key")
@common
def config_unset(url: str, key: str) -> None:
    """Unset option KEY (back to its default)."""
    with _connect(url) as client:
        client.config_unset(key)
    show({key: None}, text=f"{_plain(key)} unset")


# -- top ------------------------------------------------------------------------------------


@group.command()
@top_options
@common
def top(url: str, interval: float, count: int | None) -> None:
    """The queues, live: jobs by state, failed today, and jobs popped and completed per
    second (from today's statistics of each queue)."""
    columns = [Column(name, name) for name in
               ("waiting", "running", "stalled", "scheduled", "depends", "recurring", "failed")]
    columns += [Column("popped/s", "popped", rate=True),
                Column("completed/s", "completed", rate=True)]
    with _connect(url) as client:

        def poll() -> Poll:
            raw = json_mode()
            rows: dict[str, dict[str, int]] = {}
            for counts in client.queues():
                name = counts["name"]
                stats = client.queue(name).stats()
                rows[name if raw else _text(name)] = {
                    "waiting": counts["waiting"], "running": counts["running"],
                    "stalled": counts["stalled"], "scheduled": counts["scheduled"],
                    "depends": counts["depends"], "recurring": counts["recurring"],
                    "failed": stats["failed"], "popped": stats["wait"]["count"],
                    "completed": stats["run"]["count"],
                }
            return rows

        run_top(cell(f"qless {url}"), "queue", columns, poll, interval, count)
