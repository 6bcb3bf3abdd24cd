"""The live view every ``top`` command shares: a table redrawn every ``--interval`` seconds,
with per-second rates computed from counters between two polls, until Ctrl-C (or ``--count``
redraws)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import click
from rich.live import Live
from rich.table import Table

from jobwire.cli._app import console, json_mode, print_json

#: One poll: a row key (a tube, a function, a queue) -> its numbers.
Poll = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class Column:
    """A column of a top table: ``field`` of the poll, or with ``rate=True`` the per-second
    change of that field since the previous poll."""

    title: str
    field: str
    rate: bool = False


def top_options(f: Callable[..., object]) -> Callable[..., object]:
    """``--interval`` and ``--count``, for every ``top`` command."""
    f = click.option("--count", "-n", type=click.IntRange(min=1), default=None,
                     help="Redraw this many times, then exit (default: until Ctrl-C).")(f)
    f = click.option("--interval", "-i", type=click.FloatRange(min=0.1), default=1.0,
                     show_default=True, help="Seconds between redraws.")(f)
    return f


def _table(title: str, key: str, columns: Sequence[Column], now: Poll, before: Poll | None,
           elapsed: float) -> Table:
    table = Table(title=title)
    table.add_column(key)
    for column in columns:
        table.add_column(column.title, justify="right")
    for name in sorted(now):
        cells = [name]
        for column in columns:
            value = now[name].get(column.field, 0)
            if not column.rate:
                cells.append(str(value))
            elif before is None or name not in before or elapsed <= 0:
                cells.append("-")
            else:
                cells.append(f"{(value - before[name].get(column.field, 0)) / elapsed:.1f}")
        table.add_row(*cells)
    return table


def _repeat(draw: Callable[[], None], interval: float, count: int | None) -> None:
    """``draw()`` every ``interval`` seconds, ``count`` times or until Ctrl-C (which ends it
    quietly: exit status 0)."""
    drawn = 0
    try:
        while count is None or drawn < count:
            if drawn:
                time.sleep(interval)
            draw()
            drawn += 1
    except KeyboardInterrupt:
        pass


def run_top(title: str, key: str, columns: Sequence[Column], poll: Callable[[], Poll],
            interval: float, count: int | None) -> None:
    """Poll and redraw until Ctrl-C or ``count`` redraws. Under ``--json`` each poll is
    printed as one JSON line (the raw numbers) instead; on a pipe or a file, each table is
    printed after the last (nothing to redraw)."""
    if json_mode():
        _repeat(lambda: print_json({"time": time.time(), "rows": poll()}), interval, count)
        return
    before: Poll | None = None
    last = 0.0

    def table() -> Table:
        nonlocal before, last
        now = poll()
        at = time.monotonic()
        drawn = _table(title, key, columns, now, before, at - last)
        before, last = now, at
        return drawn

    out = console()
    if not out.is_terminal:
        _repeat(lambda: out.print(table()), interval, count)
        return
    with Live(console=out, auto_refresh=False, screen=False) as live:
        _repeat(lambda: live.update(table(), refresh=True), interval, count)
