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


def run_top(title: str, key: str, columns: Sequence[Column], poll: Callable[[], Poll],
            interval: float, count: int | None) -> None:
    """Poll and redraw until Ctrl-C or ``count`` redraws. Under ``--json`` each poll is
    printed as one JSON line (the raw numbers) instead."""
    before: Poll | None = None
    last = 0.0
    drawn = 0
    if json_mode():
        while count is None or drawn < count:
            if drawn:
                time.sleep(interval)
            print_json({"time": time.time(), "rows": poll()})
            drawn += 1
        return
    with Live(console=console(), auto_refresh=False, screen=False) as live:
        try:
            while count is None or drawn < count:
                if drawn:
                    time.sleep(interval)
                now = poll()
                at = time.monotonic()
                live.update(_table(title, key, columns, now, before, at - last), refresh=True)
                before, last = now, at
                drawn += 1
        except KeyboardInterrupt:
            pass
