"""What the dashboard's pages show, as plain records the templates read: no system's client
types reach a template. Each system's :class:`~jobwire.web._sources.Source` fills these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Column:
    """A column of an overview table: ``key`` of each row's numbers, or with ``rate=True``
    the per-second change of that key (computed by the dashboard between two polls)."""

    title: str
    key: str
    rate: bool = False


@dataclass
class Overview:
    """One server's queues (tubes, functions) with their numbers."""

    columns: list[Column]
    rows: dict[str, dict[str, int]]
    #: Queues shown as paused.
    paused: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Action:
    """A button (a POST with the CSRF token): ``verb`` with ``params`` as hidden fields;
    ``ask`` names a number field the user fills (default ``ask_default``); ``confirm`` is the
    question asked first (destructive actions)."""

    verb: str
    label: str
    params: dict[str, str]
    confirm: str | None = None
    ask: str | None = None
    ask_default: int = 1


@dataclass
class JobRow:
    """A job in a listing: its id (linked to its page when ``link``), state and a short
    summary of its body."""

    id: str
    state: str
    summary: str
    link: bool = True
    actions: list[Action] = field(default_factory=list)


@dataclass
class JobView:
    """One job: its fields, body (as text), history (qless) and actions."""

    id: str
    state: str
    fields: list[tuple[str, str]]
    body: str
    history: list[tuple[str, str]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)


@dataclass
class Histogram:
    """A histogram of durations: a count per bucket, each bucket with its label."""

    title: str
    labels: list[str]
    counts: list[int]


@dataclass
class QueueView:
    """A queue (tube, function) page: its numbers, charts, a page of its jobs in ``state``
    (``states``: those that can be listed), the next jobs of each state where the server can
    only peek (beanstalk), and the queue's own actions."""

    name: str
    stats: list[tuple[str, str]]
    bars: list[tuple[str, int]]
    histograms: list[Histogram] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    state: str | None = None
    jobs: list[JobRow] = field(default_factory=list)
    offset: int = 0
    more: bool = False
    peeks: list[tuple[str, JobView | None]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    note: str = ""


@dataclass
class FailedGroup:
    """A group of failed jobs (a qless failure group, a tube's buried jobs): how many, and
    the actions on the whole group."""

    name: str
    count: int
    actions: list[Action] = field(default_factory=list)


@dataclass
class FailedView:
    """The failed (buried) jobs of a server, grouped; with ``group`` chosen, a page of its
    jobs."""

    groups: list[FailedGroup]
    group: str | None = None
    jobs: list[JobView] = field(default_factory=list)
    total: int = 0
    offset: int = 0
    note: str = ""
