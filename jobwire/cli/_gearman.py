"""``jobwire gearman ...``: commands for Gearman servers (one, or several comma-separated).

``--url`` takes every form :class:`gearman_client.Client` takes: ``host:port``, ``host``,
``gearman://host:port``, ``[::1]:4730``, and a comma-separated list of them as
``GEARMAN_SERVERS`` holds. ``submit`` goes through a :class:`~gearman_client.Client` over the
whole list; the admin commands (``status``, ``workers``, ``jobs``, ``cancel``, ``top``) ask each
server in turn with an :class:`~gearman_client.Admin` (the admin protocol is per server), and
show a ``server`` column when there is more than one.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click
from rich.table import Table

from jobwire.cli._app import (
    CANNOT_CONNECT,
    OK,
    SERVER_SAID_NO,
    Failed,
    body_json,
    body_text,
    cell,
    console,
    json_mode,
    rows_table,
    shared_flags,
    show,
    tls_options,
    url_option,
    wait_or_alias,
)
from jobwire.cli._top import Column, Poll, run_top, top_options

if TYPE_CHECKING:  # the client loads on first use: --help stays fast
    from gearman_client import Admin
    from jobwire._url import Address

ENV = "GEARMAN_SERVERS"
DEFAULT = "127.0.0.1:4730"

#: --url, --json and --debug, for every command of this group.
common = url_option(ENV, DEFAULT, "Gearman servers, comma-separated")

T = TypeVar("T")


@click.group(name="gearman")
@shared_flags
def group() -> None:
    """Commands for Gearman servers (--url or $GEARMAN_SERVERS, comma-separated)."""


def _servers(url: str) -> list[Address]:
    """The servers of ``url``.

    Raises:
        InvalidAddress, TypeError: not a server address or a list of them (exit 2).
    """
    from gearman_client import DEFAULT_PORT
    from jobwire._url import resolve_addresses

    return resolve_addresses(url, scheme="gearman", default_port=DEFAULT_PORT)


def _text(value: str | bytes) -> str:
    """A name, handle or id from a server, safe for a terminal and for a rich table."""
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
    return cell(body_text(raw))


def _ask_each(url: str, ask: Callable[[Admin], T]) -> tuple[list[tuple[str, T]], list[str]]:
    """``ask(admin)`` of every server of ``url``; returns ``(server, answer)`` pairs and the
    one-line failures of the servers that could not be reached.

    Raises:
        The first server's error when none could be reached (exit 3); a server's refusal
        (``ServerError``, exit 1) at once.
    """
    from gearman_client import Admin
    from jobwire.errors import JobwireConnectionError, OperationTimeout

    answers: list[tuple[str, T]] = []
    failures: list[str] = []
    first: Exception | None = None
    for address in _servers(url):
        try:
            with Admin(address, **tls_options()) as admin:
                answers.append((str(address), ask(admin)))
        except (JobwireConnectionError, OperationTimeout) as exc:
            first = first or exc
            failures.append(f"{address}: {type(exc).__name__}: {' '.join(str(exc).split())}")
    if not answers and first is not None:
        raise first
    return answers, failures


def _finish(failures: Sequence[str], refused: bool = False) -> int:
    """The exit code after showing what the reachable servers answered: 3 when some server
    could not be reached (each said on one line on stderr), else 1 when one ``refused`` a
    command."""
    for failure in failures:
        click.echo(f"jobwire: error: {failure}", err=True)
    return CANNOT_CONNECT if failures else SERVER_SAID_NO if refused else OK


def _many(answers: Sequence[tuple[str, Any]]) -> bool:
    return len(answers) > 1


# -- admin --------------------------------------------------------------------------------------


@group.command(name="status")
@common
def status(url: str) -> int:
    """Every function: jobs queued (running ones included), running, and available workers
    (the admin 'status' command)."""
    answers, failures = _ask_each(url, lambda admin: admin.status())
    rows: list[dict[str, Any]] = [
        {"server": server, "function": s.function, "queued": s.queued, "running": s.running,
         "workers": s.workers}
        for server, found in answers for s in found
    ]
    many = _many(answers)

    def table() -> Table:
        columns = (["server"] if many else []) + ["function", "queued", "running", "workers"]
        return rows_table(columns, [
            ([r["server"]] if many else []) + [_text(r["function"]), r["queued"], r["running"],
                                              r["workers"]]
            for r in rows
        ])

    show(rows, table=table)
    return _finish(failures)


@group.command(name="workers")
@common
def workers(url: str) -> int:
    """Every connection with its functions (the admin 'workers' command; clients and admin
    connections are listed too, without functions)."""
    answers, failures = _ask_each(url, lambda admin: admin.workers())
    rows: list[dict[str, Any]] = [
        {"server": server, "fd": w.fd, "address": w.address, "client_id": w.client_id,
         "functions": list(w.functions)}
        for server, found in answers for w in found
    ]
    many = _many(answers)

    def table() -> Table:
        columns = (["server"] if many else []) + ["fd", "address", "client id", "functions"]
        return rows_table(columns, [
            ([r["server"]] if many else []) + [
                r["fd"], _text(r["address"]), _text(r["client_id"]),
                " ".join(_text(f) for f in r["functions"])]
            for r in rows
        ])

    show(rows, table=table)
    return _finish(failures)


def _jobs(admin: Admin) -> dict[str, Any]:
    """``show jobs`` and ``show unique jobs``; a server that refuses one (not gearmand 1.1.x
    nor the bundled server, which have both) gets its message instead of the list."""
    from gearman_client import ServerError

    out: dict[str, Any] = {}
    try:
        out["jobs"] = admin.show_jobs()
    except ServerError as exc:
        out["jobs_error"] = str(exc)
    try:
        out["unique"] = admin.show_unique_jobs()
    except ServerError as exc:
        out["unique_error"] = str(exc)
    return out


@group.command(name="jobs")
@common
def jobs(url: str) -> int:
    """The jobs each server holds ('show jobs': handle, retries, ignored, queued) and their
    unique ids ('show unique jobs'). A server without these commands: its message on
    stderr in place of the list, and exit status 1."""
    answers, failures = _ask_each(url, _jobs)
    refused = any(k.endswith("_error") for _, got in answers for k in got)
    if json_mode():
        show([{
            "server": server,
            "jobs": [{"handle": j.handle.decode("utf-8", "replace"), "retries": j.retries,
                      "ignored": j.ignore_job, "queued": j.queued} for j in got.get("jobs", [])],
            "unique": [u.decode("utf-8", "replace") for u in got.get("unique", [])],
            **{k: v for k, v in got.items() if k.endswith("_error")},
        } for server, got in answers])
        return _finish(failures, refused)
    many = _many(answers)
    out = console()
    for server, got in answers:
        where = f" on {server}" if many else ""
        if "jobs" in got:
            out.print(rows_table(["handle", "retries", "ignored", "queued"], [
                [_text(j.handle), j.retries, "yes" if j.ignore_job else "no",
                 "yes" if j.queued else "no"] for j in got["jobs"]
            ], title=cell(f"{len(got['jobs'])} jobs{where}")))
        else:
            click.echo(f"jobwire: error: show jobs{where}: {got['jobs_error']}", err=True)
        if "unique" in got:
            unique = [u for u in got["unique"] if u]
            out.print(rows_table(["unique id"], [[_text(u)] for u in unique],
                                 title=cell(f"{len(unique)} unique ids{where}")))
        else:
            click.echo(f"jobwire: error: show unique jobs{where}: {got['unique_error']}",
                       err=True)
    return _finish(failures, refused)


@group.command(name="cancel")
@click.argument("handle")
@common
def cancel(url: str, handle: str) -> int:
    """Cancel the job HANDLE (gearmand's admin 'cancel job'): its waiting clients get
    WORK_FAIL at once. Exit 1 with the server's message if no server knows the job (or the
    server has no such command)."""
    from gearman_client import ServerError

    refusals: list[str] = []

    def ask(admin: Admin) -> bool:
        try:
            admin.cancel_job(handle)
        except ServerError as exc:
            refusals.append(str(exc))
            return False
        return True

    answers, failures = _ask_each(url, ask)
    where = [server for server, done in answers if done]
    if where:
        show({"cancelled": handle, "server": where[0]}, text=f"cancelled job {handle}")
        return _finish(failures)
    for failure in failures:
        click.echo(f"jobwire: error: {failure}", err=True)
    raise Failed(f"cannot cancel job {handle}: {'; '.join(dict.fromkeys(refusals))}",
                 code=CANNOT_CONNECT if failures else 1)


# -- submit -------------------------------------------------------------------------------------


def _update_line(update: Any) -> tuple[str, dict[str, Any]]:
    """An update (WORK_DATA, WORK_WARNING, WORK_STATUS) as a line for stderr and as JSON."""
    from gearman_client import WorkData, WorkStatus

    if isinstance(update, WorkStatus):
        return (f"status {update.numerator}/{update.denominator}",
                {"type": "status", "numerator": update.numerator,
                 "denominator": update.denominator})
    kind = "data" if isinstance(update, WorkData) else "warning"
    return f"{kind}: {body_text(update.data)}", {"type": kind, **body_json(update.data)}


@group.command(name="submit")
@click.argument("function")
@click.argument("data", required=False)
@click.option("--file", "file", type=click.File("rb"), default=None,
              help="Take the job's data from this file ('-': stdin).")
@click.option("--background", "-b", is_flag=True,
              help="Queue the job and print its handle, without waiting for it.")
@click.option("--priority", "-p", type=click.Choice(["high", "normal", "low"]),
              default="normal", show_default=True)
@click.option("--unique", "-u", default=None, help="The job's unique id (jobs with the same "
              "unique id are coalesced into one).")
@click.option("--wait", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds to wait for the job's result: for a worker to take it and finish "
              "(the library's submit(timeout=)); default: as long as it takes. Running out "
              "exits 1 (timed out); the job stays queued or running on the server.")
@click.option("--timeout", "wait_alias", type=click.FloatRange(min=0, min_open=True),
              default=None, hidden=True)  # the old name of --wait
@common
def submit(url: str, function: str, data: str | None, file: IO[bytes] | None,
           background: bool, priority: str, unique: str | None, wait: float | None,
           wait_alias: float | None) -> None:
    """Submit a job of FUNCTION with DATA ('-': stdin; none: empty, or --file).

    In the foreground it waits, shows the worker's WORK_STATUS, WORK_DATA and WORK_WARNING
    updates on stderr as they arrive, then prints the result (exactly its bytes when stdout is
    not a terminal). Exit 1 if the job fails, or if --wait runs out."""
    from gearman_client import Client, Priority
    from jobwire.errors import OperationTimeout

    wait = wait_or_alias(wait, wait_alias)

    if data is not None and file is not None:
        raise click.UsageError("give DATA or --file, not both")
    if file is not None:
        payload = file.read()
    elif data == "-":
        payload = sys.stdin.buffer.read()
    else:
        payload = os.fsencode(data or "")
    level = Priority(priority)
    with Client(url, timeout=10.0, **tls_options()) as client:
        if background:
            handle = client.submit_background(function, payload, unique=unique, priority=level)
            text = handle.decode("utf-8", "replace")
            show({"handle": text}, text=body_text(handle))
            return
        updates: list[dict[str, Any]] = []

        def on_update(update: Any) -> None:
            line, record = _update_line(update)
            updates.append(record)
            click.echo(line, err=True)

        try:
            result = client.submit(function, payload, unique=unique, priority=level,
                                   timeout=wait, on_update=on_update)
        except OperationTimeout:
            if wait is None:  # no limit was asked for: the server stopped answering
                raise
            raise Failed(f"timed out: no result for {function!r} within --wait {wait:g} s (no "
                         "worker finished it; the job stays on the server)") from None
    if json_mode():
        show({"result": body_json(result), "updates": updates})
    elif sys.stdout.isatty():
        click.echo(body_text(result))
    else:
        sys.stdout.buffer.write(result)
        sys.stdout.buffer.flush()


# -- top ----------------------------------------------------------------------------------------


@group.command(name="top")
@top_options
@common
def top(url: str, interval: float, count: int | None) -> None:
    """A live table of the functions of every server: jobs queued, running, available workers,
    and the queue's net change per second; redrawn every --interval seconds until Ctrl-C."""
    from gearman_client import Admin

    servers = _servers(url)
    admins = [Admin(address, **tls_options()) for address in servers]
    raw = json_mode()
    columns = [Column("queued", "queued"), Column("running", "running"),
               Column("workers", "workers"), Column("queued/s", "queued", rate=True)]

    def poll() -> Poll:
        rows: dict[str, dict[str, int]] = {}
        for admin in admins:
            for s in admin.status():
                row = rows.setdefault(s.function if raw else _text(s.function),
                                      {"queued": 0, "running": 0, "workers": 0})
                row["queued"] += s.queued
                row["running"] += s.running
                row["workers"] += s.workers
        return rows

    with contextlib.ExitStack() as stack:
        for admin in admins:
            stack.enter_context(admin)  # connects: an unreachable server ends it here (exit 3)
        title = "gearmand " + ", ".join(str(a) for a in servers)
        run_top(cell(title), "function", columns, poll, interval, count)
