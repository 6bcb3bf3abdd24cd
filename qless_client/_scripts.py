"""The qless Lua script (``lua/qless.lua``) and one typed call builder per script command.

Every qless operation is one ``EVALSHA`` of the same script::

    EVALSHA <SHA> <numkeys> <keys...> <command> <now> <args...>

Each builder here (``put``, ``pop``, ``complete``...) checks and formats its arguments, lists the
keys the call must declare (the script refuses a call whose KEYS are not exactly that list), and
returns a :class:`ScriptCall`: ``keys``, ``args`` and ``decode`` (turn the reply into Python
values). It does no I/O. A blocking connection runs it with :meth:`ScriptCall.run`; async code
writes ``call.decode(await redis.evalsha(SHA, call.keys, call.args))``. Load the script once per
connection with ``redis.load_script(SOURCE)`` so ``evalsha`` can reload it after a
``SCRIPT FLUSH`` or a restart.

``now`` is the caller's clock in UTC seconds; it is sent with 3 decimals (milliseconds), the
precision that keeps jobs of equal priority in the order they were put.

Script errors are error replies ``QLESS <command>: <Reason>: <detail>``; :func:`script_error`
splits one, and :data:`REASONS` lists every ``<Reason>`` (docs/qless.md says when each comes).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Generic, Protocol, TypedDict, TypeVar

from jobwire._numbers import parse_decimal
from jobwire.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "BUCKETS",
    "DEFAULTS",
    "REASONS",
    "SHA",
    "SOURCE",
    "JobData",
    "QueueCounts",
    "ScriptCall",
    "ScriptConnection",
    "ScriptError",
    "Stats",
    "Summary",
    "bucket_of",
    "cancel",
    "complete",
    "config_get",
    "config_get_all",
    "config_set",
    "config_unset",
    "day_of",
    "depends_off",
    "depends_off_all",
    "depends_on",
    "fail",
    "failed",
    "failed_counts",
    "get",
    "heartbeat",
    "jobs",
    "load",
    "peek",
    "pop",
    "priority",
    "put",
    "queue",
    "queues",
    "recur",
    "recur_get",
    "retry",
    "script_error",
    "stats",
    "tag_add",
    "tag_get",
    "tag_remove",
    "track",
    "tracked",
    "unfail",
    "unrecur",
    "untrack",
    "worker",
    "workers",
]

#: The script's source, as shipped in the package.
SOURCE: bytes = resources.files("qless_client").joinpath("lua/qless.lua").read_bytes()
#: Its SHA1: the name ``EVALSHA`` runs it by.
SHA: str = hashlib.sha1(SOURCE).hexdigest()

#: The options the script knows a default for (``config.get`` reports them when unset).
DEFAULTS: dict[str, int] = {
    "heartbeat": 60,
    "stats-history": 30,
    "histogram-history": 7,
    "jobs-history-count": 50_000,
    "jobs-history": 7 * 24 * 60 * 60,
    "max-worker-age": 24 * 60 * 60,
}

#: Every ``<Reason>`` of a script error reply.
REASONS = frozenset(
    {
        "Bad argument",
        "Unknown command",
        "Undeclared keys",
        "Job does not exist",
        "Lost lock",
        "Wrong queue",
        "Wrong state",
        "Has dependents",
    }
)

_DAY = 86400
_NS = "ql:"
_GLOBAL_KEYS = (
    "ql:config",
    "ql:queues",
    "ql:workers",
    "ql:failures",
    "ql:completed",
    "ql:tracked",
)
_QUEUE_PARTS = ("work", "locks", "scheduled", "depends", "recur")
_STATES = frozenset(
    {"waiting", "running", "stalled", "scheduled", "depends", "complete", "recurring"}
)

T = TypeVar("T")


def _bucket_names() -> tuple[str, ...]:
    names = [f"s{i}" for i in range(60)]
    names += [f"m{i}" for i in range(1, 60)]
    names += [f"q{i}" for i in range(4, 96)]
    names += [f"h{i}" for i in range(24, 72)]
    names += [f"d{i}" for i in range(3, 31)]
    return tuple(names)


#: The histogram's bucket fields in the stats hashes, in the order of ``histogram`` lists:
#: ``s0``-``s59`` (seconds), ``m1``-``m59`` (minutes), ``q4``-``q95`` (quarter hours, from 1 h
#: to 24 h), ``h24``-``h71`` (hours, from 1 day to 3 days), ``d3``-``d30`` (days; ``d30`` also
#: counts everything longer): 287 buckets.
BUCKETS: tuple[str, ...] = _bucket_names()


def bucket_of(seconds: float) -> str:
    """The histogram bucket field a duration of ``seconds`` is counted in."""
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"s{math.floor(seconds)}"
    if seconds < 3600:
        return f"m{math.floor(seconds / 60)}"
    if seconds < _DAY:
        return f"q{math.floor(seconds / 900)}"
    if seconds < 3 * _DAY:
        return f"h{math.floor(seconds / 3600)}"
    return f"d{min(math.floor(seconds / _DAY), 30)}"


# --------------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------------


class HistoryEntry(TypedDict, total=False):
    """One stage of a job: its queue and when it was put, popped, done or failed."""

    q: str
    put: float
    popped: float
    done: float
    failed: float
    worker: str


class Failure(TypedDict):
    """Why a failed job failed."""

    group: str
    message: str
    when: float
    worker: str


class JobData(TypedDict):
    """A job as ``get``, ``pop`` and ``peek`` describe it (``data`` is the JSON text)."""

    jid: str
    klass: str
    state: str
    queue: str | None
    worker: str
    priority: int
    expires: float
    retries: int
    remaining: int
    data: str
    tags: list[str]
    tracked: bool
    history: list[HistoryEntry]
    failure: Failure | None
    dependents: list[str]
    dependencies: list[str]


class FailedJobData(JobData, total=False):
    """A job of a failure group: also its failure's ``message`` and ``type`` (the group)."""

    message: str
    type: str


class QueueCounts(TypedDict):
    """How many jobs a queue has in each state."""

    name: str
    waiting: int
    running: int
    stalled: int
    scheduled: int
    depends: int
    recurring: int


class Summary(TypedDict):
    """Wait or run times of a queue on a day: count, mean, sample variance, histogram."""

    total: int
    mean: float
    variance: float
    histogram: list[int]


class Stats(TypedDict):
    """A queue's statistics for one day."""

    failed: int
    failures: int
    retries: int
    wait: Summary
    run: Summary


class WorkerSummary(TypedDict):
    """A worker, with how many jobs it holds and how many of those are stalled."""

    name: str
    jobs: int
    stalled: int


class WorkerJobs(TypedDict):
    """The jobs one worker holds, live and stalled."""

    jobs: list[str]
    stalled: list[str]


class Page(TypedDict):
    """A page of a listing and the listing's total length."""

    total: int
    jobs: list[str]


class FailedPage(TypedDict):
    """A page of a failure group and the group's length."""

    total: int
    jobs: list[FailedJobData]


class Tracked(TypedDict):
    """Tracked jobs still present, and tracked jids whose data is gone."""

    jobs: list[JobData]
    expired: list[str]


class RecurData(TypedDict):
    """A recurring job's template."""

    jid: str
    klass: str
    data: str
    queue: str
    state: str
    type: str
    priority: int
    tags: list[str]
    interval: float
    count: int
    retries: int
    backlog: int
    next: float | None


# --------------------------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------------------------


class ScriptConnection(Protocol):
    """What :meth:`ScriptCall.run` needs: ``qless_client.Redis`` is one."""

    def evalsha(self, sha: str, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any: ...

    def load_script(self, source: str | bytes) -> str: ...


@dataclass(frozen=True)
class ScriptCall(Generic[T]):
    """One ``EVALSHA`` of the qless script: what to send and how to read the reply."""

    #: The script command (``"put"``, ``"pop"``...).
    command: str
    #: The keys to declare (``numkeys`` is their count).
    keys: tuple[str, ...]
    #: The script's ARGV: the command, ``now``, then the command's arguments.
    args: tuple[str, ...]
    #: Turns the reply into the call's result.
    decode: Callable[[Any], T]

    def run(self, conn: ScriptConnection) -> T:
        """Send ``EVALSHA SHA len(keys) *keys *args`` on ``conn``; return the decoded reply.

        Raises:
            qless_client.RedisError: the script refused the call (see :func:`script_error`), or
                ``NOSCRIPT`` when the script was never loaded on ``conn``.
        """
        return self.decode(conn.evalsha(SHA, self.keys, self.args))


def load(conn: ScriptConnection) -> str:
    """Send ``SCRIPT LOAD`` with the qless script on ``conn``; return its SHA1 (:data:`SHA`)."""
    return conn.load_script(SOURCE)


@dataclass(frozen=True)
class ScriptError:
    """A script error reply split into its parts."""

    command: str
    reason: str
    detail: str


def script_error(message: str) -> ScriptError | None:
    """Split ``"QLESS <command>: <Reason>: <detail>"``; None for any other error text."""
    if not message.startswith("QLESS "):
        return None
    parts = message[6:].split(": ", 2)
    if len(parts) < 2:
        return None
    return ScriptError(parts[0], parts[1], parts[2] if len(parts) > 2 else "")


# --------------------------------------------------------------------------------------------
# Argument formatting (the script checks values again and says what is wrong)
# --------------------------------------------------------------------------------------------


def _time(value: float, name: str = "now") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise LocalProtocolError(f"{name} must be a finite number >= 0, not {value!r}")
    return f"{value:.3f}"


def _number(value: float, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise LocalProtocolError(f"{name} must be finite, not {value!r}")
    return repr(float(value)) if isinstance(value, float) else str(value)


def _int(value: int, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is an int, not {type(value).__name__}")
    return str(value)


def _str(value: str, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} is a str, not {type(value).__name__}")
    return value


def _names(values: Sequence[str], name: str) -> list[str]:
    """A list of strings, duplicates dropped (as the script does), order kept."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} is a sequence of str, not {type(values).__name__}")
    for value in values:
        if not isinstance(value, str) or not value:
            raise LocalProtocolError(f"{name} holds {value!r}, not a non-empty str")
    return list(dict.fromkeys(values))


def day_of(when: float) -> int:
    """Midnight (UTC) of the day ``when`` falls in, as the script computes it from the value
    it receives (``when`` rounded to milliseconds)."""
    seconds = math.floor(float(_time(when, "when")))
    return seconds - seconds % _DAY


def _job_keys(jid: str) -> list[str]:
    return [f"{_NS}j:{jid}", f"{_NS}j:{jid}-dependencies", f"{_NS}j:{jid}-dependents"]


def _queue_keys(name: str) -> list[str]:
    return [f"{_NS}q:{name}-{part}" for part in _QUEUE_PARTS]


def _stats_keys(name: str, when: float) -> list[str]:
    day = day_of(when)
    return [f"{_NS}s:{kind}:{day}:{name}" for kind in ("wait", "run", "stats")]


def _dep_keys(jids: Sequence[str]) -> list[str]:
    out: list[str] = []
    for jid in jids:
        out += [f"{_NS}j:{jid}", f"{_NS}j:{jid}-dependents"]
    return out


def _call(
    command: str, now: float, keys: Sequence[str], args: Sequence[str], decode: Callable[[Any], T]
) -> ScriptCall[T]:
    return ScriptCall(
        command, (*_GLOBAL_KEYS, *keys), (command, _time(now), *args), decode
    )


def _text(reply: Any) -> str:
    if isinstance(reply, bytes):
        try:
            return reply.decode()
        except UnicodeDecodeError:
            raise RemoteProtocolError(f"the qless script answered {reply!r:.80}") from None
    if isinstance(reply, str):
        return reply
    raise RemoteProtocolError(f"the qless script answered {reply!r:.80}, not a string")


def _json(reply: Any) -> Any:
    try:
        return json.loads(_text(reply))
    except ValueError as exc:
        raise RemoteProtocolError(f"the qless script answered bad JSON: {exc}") from None


def _optional_json(reply: Any) -> Any:
    return None if reply is None else _json(reply)


def _int_reply(reply: Any) -> int:
    if isinstance(reply, bool) or not isinstance(reply, int):
        raise RemoteProtocolError(f"the qless script answered {reply!r:.80}, not an integer")
    return reply


def _none(reply: Any) -> None:
    return None


# --------------------------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------------------------


def put(
    now: float,
    queue: str,
    jid: str,
    klass: str,
    data: str,
    *,
    delay: float = 0,
    priority: int | None = None,
    tags: Sequence[str] | None = None,
    retries: int | None = None,
    depends: Sequence[str] | None = None,
) -> ScriptCall[str]:
    """``put``: create job ``jid`` in ``queue`` (or move it there); the reply is the jid.

    ``data`` is JSON text. ``priority`` (lower runs sooner, default 0), ``tags``, ``retries``
    (default 5) left out keep a moved job's own. With ``depends`` the job waits for those jobs
    (state ``depends``); with ``delay`` it is ``scheduled`` that many seconds; the two exclude
    each other.
    """
    args = [_str(queue, "queue"), _str(jid, "jid"), _str(klass, "klass"), _str(data, "data"),
            _number(delay, "delay")]
    keys = _job_keys(jid) + _queue_keys(queue)
    if priority is not None:
        args += ["priority", _int(priority, "priority")]
    if tags is not None:
        unique = _names(tags, "tags")
        args += ["tags", json.dumps(list(tags))]
        keys += [f"{_NS}t:{tag}" for tag in unique]
    if retries is not None:
        args += ["retries", _int(retries, "retries")]
    if depends is not None:
        unique = _names(depends, "depends")
        args += ["depends", json.dumps(list(depends))]
        keys += _dep_keys(unique)
    return _call("put", now, keys, args, _text)


def pop(now: float, queue: str, worker: str, count: int = 1) -> ScriptCall[list[JobData]]:
    """``pop``: lock up to ``count`` jobs of ``queue`` for ``worker``: jobs whose lock expired
    first (each counts as a retry), then waiting jobs by priority and time put."""
    keys = [*_queue_keys(queue), f"{_NS}w:{worker}:jobs", *_stats_keys(queue, now)]
    args = [_str(queue, "queue"), _str(worker, "worker"), _int(count, "count")]
    return _call("pop", now, keys, args, _json)


def peek(now: float, queue: str, count: int = 1) -> ScriptCall[list[JobData]]:
    """``peek``: the jobs ``pop`` would hand out next, without locking them."""
    return _call("peek", now, _queue_keys(queue), [_str(queue, "queue"), _int(count, "count")],
                 _json)


def complete(
    now: float,
    jid: str,
    worker: str,
    queue: str,
    data: str,
    *,
    next: str | None = None,
    delay: float = 0,
    depends: Sequence[str] | None = None,
) -> ScriptCall[str]:
    """``complete``: ``worker`` finished ``jid`` (which it holds in ``queue``); the reply is the
    job's new state: ``complete``, or with ``next`` its state in that queue (``waiting``,
    ``scheduled`` after ``delay``, ``depends`` on ``depends``)."""
    keys = [*_job_keys(jid), *_queue_keys(queue), f"{_NS}w:{worker}:jobs",
            *_stats_keys(queue, now)]
    args = [_str(jid, "jid"), _str(worker, "worker"), _str(queue, "queue"), _str(data, "data")]
    if next is not None:
        args += ["next", _str(next, "next")]
        keys += _queue_keys(next)
    if delay:
        args += ["delay", _number(delay, "delay")]
    if depends is not None:
        unique = _names(depends, "depends")
        args += ["depends", json.dumps(list(depends))]
        keys += _dep_keys(unique)
    return _call("complete", now, keys, args, _text)


def fail(
    now: float, jid: str, worker: str, group: str, message: str, data: str | None = None
) -> ScriptCall[str]:
    """``fail``: mark ``jid`` failed in failure ``group`` with ``message`` (and new ``data``);
    any state can fail. The reply is the jid."""
    args = [_str(jid, "jid"), _str(worker, "worker"), _str(group, "group"),
            _str(message, "message")]
    if data is not None:
        args.append(_str(data, "data"))
    return _call("fail", now, [*_job_keys(jid), f"{_NS}f:{group}"], args, _text)


def failed_counts(now: float) -> ScriptCall[dict[str, int]]:
    """``failed``: how many jobs each failure group holds."""
    return _call("failed", now, [], [], _json)


def failed(now: float, group: str, offset: int = 0, count: int = 25) -> ScriptCall[FailedPage]:
    """``failed <group>``: the group's length and a page of its jobs, the newest first."""
    args = [_str(group, "group"), _int(offset, "offset"), _int(count, "count")]
    return _call("failed", now, [f"{_NS}f:{group}"], args, _json)


def retry(
    now: float, jid: str, queue: str, worker: str, delay: float = 0
) -> ScriptCall[int]:
    """``retry``: ``worker`` gives ``jid`` back to ``queue`` (after ``delay``); one retry is
    used. The reply is the retries left; negative when none were left and the job failed (group
    ``failed-retries-<queue>``)."""
    keys = [*_job_keys(jid), *_queue_keys(queue), f"{_NS}w:{worker}:jobs",
            f"{_NS}f:failed-retries-{queue}", *_stats_keys(queue, now)]
    args = [_str(jid, "jid"), _str(queue, "queue"), _str(worker, "worker"),
            _number(delay, "delay")]
    return _call("retry", now, keys, args, _int_reply)


def heartbeat(now: float, jid: str, worker: str, data: str | None = None) -> ScriptCall[float]:
    """``heartbeat``: ``worker`` renews its lock on ``jid`` (and replaces its ``data``); the
    reply is the lock's new expiry time."""
    args = [_str(jid, "jid"), _str(worker, "worker")]
    if data is not None:
        args.append(_str(data, "data"))
    return _call("heartbeat", now, [*_job_keys(jid), f"{_NS}w:{worker}:jobs"], args,
                 lambda reply: parse_decimal(_text(reply), "heartbeat's expiry"))


def cancel(now: float, *jids: str) -> ScriptCall[list[str]]:
    """``cancel``: delete jobs and every trace of them; the reply lists those that existed.
    Refused (``Has dependents``) while a job not cancelled with them depends on one."""
    keys: list[str] = []
    for jid in jids:
        keys += _job_keys(_str(jid, "jid"))
    return _call("cancel", now, keys, list(jids), _json)


def depends_on(now: float, jid: str, *deps: str) -> ScriptCall[int]:
    """``depends <jid> on <deps>``: ``jid`` (in state ``depends``) also waits for ``deps``."""
    keys = _job_keys(jid) + _dep_keys([_str(d, "jid") for d in deps])
    return _call("depends", now, keys, [_str(jid, "jid"), "on", *deps], _int_reply)


def depends_off(now: float, jid: str, *deps: str) -> ScriptCall[int]:
    """``depends <jid> off <deps>``: ``jid`` stops waiting for ``deps`` (and is released to
    its queue's work when nothing is left)."""
    keys = _job_keys(jid) + _dep_keys([_str(d, "jid") for d in deps])
    return _call("depends", now, keys, [_str(jid, "jid"), "off", *deps], _int_reply)


def depends_off_all(now: float, jid: str) -> ScriptCall[int]:
    """``depends <jid> off all``: ``jid`` stops waiting for anything."""
    return _call("depends", now, _job_keys(jid), [_str(jid, "jid"), "off", "all"], _int_reply)


def priority(now: float, jid: str, value: int) -> ScriptCall[int]:
    """``priority``: set ``jid``'s priority (a waiting job keeps its place among equals)."""
    return _call("priority", now, _job_keys(jid), [_str(jid, "jid"), _int(value, "priority")],
                 _int_reply)


def tag_add(now: float, jid: str, *tags: str) -> ScriptCall[list[str]]:
    """``tag add``: add ``tags`` to ``jid``; the reply is its tags."""
    keys = _job_keys(jid) + [f"{_NS}t:{_str(tag, 'tag')}" for tag in tags]
    return _call("tag", now, keys, ["add", _str(jid, "jid"), *tags], _json)


def tag_remove(now: float, jid: str, *tags: str) -> ScriptCall[list[str]]:
    """``tag remove``: remove ``tags`` from ``jid``; the reply is its tags."""
    keys = _job_keys(jid) + [f"{_NS}t:{_str(tag, 'tag')}" for tag in tags]
    return _call("tag", now, keys, ["remove", _str(jid, "jid"), *tags], _json)


def tag_get(now: float, tag: str, offset: int = 0, count: int = 25) -> ScriptCall[Page]:
    """``tag get``: how many jobs carry ``tag`` and a page of them, oldest tagging first."""
    args = ["get", _str(tag, "tag"), _int(offset, "offset"), _int(count, "count")]
    return _call("tag", now, [f"{_NS}t:{tag}"], args, _json)


def track(now: float, jid: str) -> ScriptCall[int]:
    """``track track``: add ``jid`` to ``ql:tracked``; 1 if it was not tracked yet."""
    return _call("track", now, _job_keys(jid), ["track", _str(jid, "jid")], _int_reply)


def untrack(now: float, jid: str) -> ScriptCall[int]:
    """``track untrack``: remove ``jid`` from ``ql:tracked``; 1 if it was tracked."""
    return _call("track", now, _job_keys(jid), ["untrack", _str(jid, "jid")], _int_reply)


def tracked(now: float) -> ScriptCall[Tracked]:
    """``track``: the tracked jobs, and the tracked jids whose job is gone."""
    return _call("track", now, [], [], _json)


def get(now: float, jid: str) -> ScriptCall[JobData | None]:
    """``get``: the job, or None when there is no job ``jid``."""
    return _call("get", now, _job_keys(jid), [_str(jid, "jid")], _optional_json)


def jobs(
    now: float, state: str, queue: str | None = None, offset: int = 0, count: int = 25
) -> ScriptCall[list[str]]:
    """``jobs``: a page of the jids of ``queue`` in ``state`` (``waiting``, ``running``,
    ``stalled``, ``scheduled``, ``depends``, ``recurring``), or of all ``complete`` jobs,
    newest first (``queue`` None)."""
    if state not in _STATES:
        raise LocalProtocolError(f"state is one of {sorted(_STATES)}, not {state!r}")
    if (state == "complete") != (queue is None):
        raise LocalProtocolError("jobs takes a queue for every state but 'complete'")
    page = [_int(offset, "offset"), _int(count, "count")]
    if queue is None:
        return _call("jobs", now, [], [state, *page], _json)
    return _call("jobs", now, _queue_keys(queue), [state, _str(queue, "queue"), *page], _json)


def queues(now: float) -> ScriptCall[list[QueueCounts]]:
    """``queues``: the counts of every known queue, in the order they were first seen."""
    return _call("queues", now, [], [], _json)


def queue(now: float, name: str) -> ScriptCall[QueueCounts]:
    """``queues <name>``: the counts of one queue."""
    return _call("queues", now, _queue_keys(name), [_str(name, "queue")], _json)


def workers(now: float) -> ScriptCall[list[WorkerSummary]]:
    """``workers``: every worker seen within ``max-worker-age``, the most recent first."""
    return _call("workers", now, [], [], _json)


def worker(now: float, name: str) -> ScriptCall[WorkerJobs]:
    """``workers <name>``: the jobs one worker holds, live and stalled."""
    return _call("workers", now, [f"{_NS}w:{name}:jobs"], [_str(name, "worker")], _json)


def stats(now: float, queue: str, date: float) -> ScriptCall[Stats]:
    """``stats``: ``queue``'s statistics for the (UTC) day of ``date``."""
    args = [_str(queue, "queue"), _time(date, "date")]
    return _call("stats", now, _stats_keys(queue, date), args, _json)


def config_get(now: float, option: str) -> ScriptCall[str | None]:
    """``config.get <option>``: its value (or default), None when neither exists."""
    return _call("config.get", now, [], [_str(option, "option")],
                 lambda reply: None if reply is None else _text(reply))


def config_get_all(now: float) -> ScriptCall[dict[str, str]]:
    """``config.get``: every option set, and the defaults of those not set."""
    return _call("config.get", now, [], [], _json)


def config_set(now: float, option: str, value: str | int | float) -> ScriptCall[None]:
    """``config.set``: store an option (the documented numeric ones must be numbers >= 0)."""
    text = value if isinstance(value, str) else _number(value, option)
    return _call("config.set", now, [], [_str(option, "option"), text], _none)


def config_unset(now: float, option: str) -> ScriptCall[None]:
    """``config.unset``: forget an option (its default applies again)."""
    return _call("config.unset", now, [], [_str(option, "option")], _none)


def unfail(now: float, queue: str, group: str, count: int = 25) -> ScriptCall[int]:
    """``unfail``: move the ``count`` oldest jobs of failure ``group`` to ``queue``; the reply
    is how many moved."""
    keys = [*_queue_keys(queue), f"{_NS}f:{group}"]
    args = [_str(queue, "queue"), _str(group, "group"), _int(count, "count")]
    return _call("unfail", now, keys, args, _int_reply)


def recur(
    now: float,
    queue: str,
    jid: str,
    klass: str,
    data: str,
    interval: float,
    *,
    offset: float = 0,
    priority: int = 0,
    tags: Sequence[str] = (),
    retries: int = 5,
    backlog: int = 0,
) -> ScriptCall[str]:
    """``recur``: a template that puts job ``<jid>-<n>`` in ``queue`` every ``interval``
    seconds, the first ``offset`` seconds from ``now`` (spawned when the queue is popped or
    peeked; ``backlog`` > 0 caps how many missed runs are made up)."""
    args = [_str(queue, "queue"), _str(jid, "jid"), _str(klass, "klass"), _str(data, "data"),
            "interval", _number(interval, "interval"), _number(offset, "offset"),
            "priority", _int(priority, "priority"), "tags", json.dumps(_names(tags, "tags")),
            "retries", _int(retries, "retries"), "backlog", _int(backlog, "backlog")]
    return _call("recur", now, [*_queue_keys(queue), f"{_NS}r:{jid}"], args, _text)


def recur_get(now: float, jid: str) -> ScriptCall[RecurData | None]:
    """``recur.get``: a recurring template, or None."""
    return _call("recur.get", now, [f"{_NS}r:{jid}"], [_str(jid, "jid")], _optional_json)


def unrecur(now: float, jid: str) -> ScriptCall[int]:
    """``unrecur``: delete a recurring template (jobs it spawned stay); 1 if it existed."""
    return _call("unrecur", now, [f"{_NS}r:{jid}"], [_str(jid, "jid")], _int_reply)
