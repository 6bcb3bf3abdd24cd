"""The qless Lua script (``lua/qless.lua``) and one typed call builder per script command.

Every qless operation is one ``EVALSHA`` of the same script, called as every qless binding
(qless-py, the Ruby gem, the web UI) calls qless-core's::

    EVALSHA <SHA> 0 <command> <now> <args...>

No keys are declared: the script finds its keys from its arguments, as qless-core's does. Each
builder here (``put``, ``pop``, ``complete``...) checks and formats its arguments in
qless-core's forms (the names and argument orders of its ``api.lua``) and returns a
:class:`ScriptCall`: ``args`` and ``decode`` (turn the reply into Python values). It does no
I/O. A blocking connection runs it with :meth:`ScriptCall.run`; async code writes
``call.decode(await redis.evalsha(SHA, (), call.args))``. Load the script once per connection
with ``redis.load_script(SOURCE)`` so ``evalsha`` can reload it after a ``SCRIPT FLUSH`` or a
restart.

``now`` is the caller's clock in UTC seconds, sent as Python's ``repr`` of the float (what
qless-py sends). The script keeps it with its fraction where qless-core does (the job's
``time``, queue scores, lock expiries) and floors it where qless-core does (history ``when``,
failure ``when``).

Replies are decoded into qless-core's own shapes (:class:`JobData`, :class:`QueueCounts`,
:class:`Stats`...), with one normalisation: qless-core's JSON encoder writes an empty list as
``{}``, which the decoders turn back into ``[]`` where the field is a list.

Script errors are Redis error replies carrying qless-core's message, as Redis 7 wraps it::

    ERR user_script:782: Heartbeat(): Job does not exist script: <sha>, on @user_script:782.

:func:`script_error` takes such a reply apart (``Heartbeat``, ``Job does not exist``, detail);
:func:`qless_client.errors.error_for` picks the typed error from qless-core's text.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Generic, Protocol, TypedDict, TypeVar

from typing_extensions import NotRequired

from jobwire._record import record
from jobwire.errors import LocalProtocolError, RemoteProtocolError

from ._resp import encode_evalsha
from .errors import split_script_error

__all__ = [
    "BUCKETS",
    "DEFAULTS",
    "SHA",
    "SOURCE",
    "Failure",
    "HistoryEntry",
    "NUMERIC_OPTIONS",
    "JobData",
    "QueueCounts",
    "RecurData",
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
    "length",
    "load",
    "log",
    "multiget",
    "pause",
    "peek",
    "pop",
    "priority",
    "put",
    "queue",
    "queue_forget",
    "queues",
    "recur",
    "recur_get",
    "recur_tag",
    "recur_untag",
    "recur_update",
    "requeue",
    "retry",
    "script_error",
    "stats",
    "tag_add",
    "tag_get",
    "tag_remove",
    "tag_top",
    "timeout",
    "track",
    "tracked",
    "unfail",
    "unpause",
    "unrecur",
    "untrack",
    "worker",
    "worker_deregister",
    "workers",
]

#: The script's source, as shipped in the package.
SOURCE: bytes = resources.files("qless_client").joinpath("lua/qless.lua").read_bytes()
#: Its SHA1: the name ``EVALSHA`` runs it by.
SHA: str = hashlib.sha1(SOURCE).hexdigest()

#: The options qless-core knows a default for (``config.get`` reports them when unset).
DEFAULTS: dict[str, int | str] = {
    "application": "qless",
    "heartbeat": 60,
    "grace-period": 10,
    "stats-history": 30,
    "histogram-history": 7,
    "jobs-history-count": 50_000,
    "jobs-history": 7 * 24 * 60 * 60,
}

_DAY = 86400
_STATES = frozenset({"running", "stalled", "scheduled", "depends", "recurring", "complete"})
#: The fields ``recur.update`` takes.
_RECUR_FIELDS = frozenset({"priority", "interval", "retries", "data", "klass", "queue",
                           "backlog"})

T = TypeVar("T")


def _bucket_names() -> tuple[str, ...]:
    names = [f"s{i}" for i in range(60)]
    names += [f"m{i}" for i in range(1, 60)]
    names += [f"h{i}" for i in range(1, 24)]
    names += [f"d{i}" for i in range(1, 7)]
    return tuple(names)


#: The histogram's bucket fields in the stats hashes, in the order of qless-core's
#: ``histogram`` lists: ``s0``-``s59`` (seconds), ``m1``-``m59`` (minutes), ``h1``-``h23``
#: (hours), ``d1``-``d6`` (days): 148 buckets. A duration of 7 days or more is counted in
#: ``d7``, ``d8``... (in the count and mean) but in no bucket of the histogram, as qless-core
#: does.
BUCKETS: tuple[str, ...] = _bucket_names()


def bucket_of(seconds: float) -> str:
    """The stats hash field a duration of ``seconds`` is counted in, as qless-core picks it:
    the whole seconds (floored; negative counts as 0) in the largest unit that fits. From 7 days
    on the field (``d7``...) is not among :data:`BUCKETS`."""
    whole = max(math.floor(seconds), 0)
    if whole < 60:
        return f"s{whole}"
    if whole < 3600:
        return f"m{whole // 60}"
    if whole < _DAY:
        return f"h{whole // 3600}"
    return f"d{whole // _DAY}"


# --------------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------------


class HistoryEntry(TypedDict, total=False):
    """One event of a job's history (the list ``ql:j:<jid>-history``): ``what`` happened
    (``put``, ``popped``, ``done``, ``failed``, ``timed-out``, or a ``log`` message) and
    ``when`` (whole seconds), with ``q`` (put), ``worker`` (popped, failed), ``group`` (failed)
    or the data a ``log`` call added."""

    what: str
    when: int
    q: str
    worker: str
    group: str


class Failure(TypedDict):
    """Why a failed job failed."""

    group: str
    message: str
    when: float
    worker: str


class JobData(TypedDict):
    """A job as ``get``, ``multiget``, ``pop`` and ``peek`` describe it (``data`` is the JSON
    text). ``failure`` is None when the job has none; ``expires`` is 0 unless it is running."""

    jid: str
    klass: str
    state: str
    queue: str
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
    spawned_from_jid: NotRequired[str]


class QueueCounts(TypedDict):
    """How many jobs a queue has in each state, and whether it is paused."""

    name: str
    waiting: int
    running: int
    stalled: int
    scheduled: int
    depends: int
    recurring: int
    paused: bool


class Summary(TypedDict):
    """Wait or run times of a queue on a day: count, mean, standard deviation (n - 1; 0 below
    two values), histogram (:data:`BUCKETS`)."""

    count: int
    mean: float
    std: float
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


class Tracked(TypedDict):
    """Tracked jobs still present, and tracked jids whose data is gone."""

    jobs: list[JobData]
    expired: list[str]


class RecurData(TypedDict):
    """A recurring job's template (``state`` is ``recur``; ``count`` is how many jobs it
    spawned, the last one ``<jid>-<count>``)."""

    jid: str
    klass: str
    state: str
    queue: str
    priority: int
    interval: float
    retries: int
    count: int
    data: str
    tags: list[str]
    backlog: int


# --------------------------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------------------------


class ScriptConnection(Protocol):
    """What :meth:`ScriptCall.run` needs: ``qless_client.Redis`` is one."""

    def evalsha(self, sha: str, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any: ...

    def load_script(self, source: str | bytes) -> str: ...


@record
class ScriptCall(Generic[T]):
    """One ``EVALSHA`` of the qless script: what to send and how to read the reply."""

    #: The script command (``"put"``, ``"pop"``, ``"recur.update"``...).
    command: str
    #: The script's ARGV: the command, ``now``, then the command's arguments.
    args: tuple[str, ...]
    #: Turns the reply into the call's result.
    decode: Callable[[Any], T]

    @property
    def now(self) -> float:
        """The ``now`` this call sends, as the script reads it."""
        return float(self.args[1])

    def command_line(self) -> list[str | int]:
        """The whole Redis command: ``["EVALSHA", SHA, 0, *args]``."""
        return ["EVALSHA", SHA, 0, *self.args]

    def encode(self) -> bytes:
        """The bytes of :meth:`command_line` on the wire (``encode_command``'s)."""
        return encode_evalsha(SHA, self.args)

    def run(self, conn: ScriptConnection) -> T:
        """Send ``EVALSHA SHA 0 *args`` on ``conn``; return the decoded reply.

        Raises:
            qless_client.RedisError: the script refused the call (a
                :class:`qless_client.ScriptError`), or ``NOSCRIPT`` when the script was never
                loaded on ``conn``.
        """
        return self.decode(conn.evalsha(SHA, (), self.args))


def load(conn: ScriptConnection) -> str:
    """Send ``SCRIPT LOAD`` with the qless script on ``conn``; return its SHA1 (:data:`SHA`)."""
    return conn.load_script(SOURCE)


@dataclass(frozen=True)
class ScriptError:
    """A script error reply taken apart: ``Heartbeat(): Job given out to another worker: w1``
    is command ``Heartbeat``, reason ``Job given out to another worker``, detail ``w1``;
    ``text`` is qless-core's whole message."""

    command: str
    reason: str
    detail: str
    text: str


def script_error(message: str) -> ScriptError | None:
    """Take apart an error reply of the script (Redis 7's ``ERR user_script:<line>: <text>
    script: <sha>, on @user_script:<line>.``); None for an error not raised by a script."""
    if "user_script:" not in message:
        return None
    text, command, reason, detail = split_script_error(message)
    return ScriptError(command, reason, detail, text)


# --------------------------------------------------------------------------------------------
# Argument formatting (qless-core checks little: the client refuses nonsense before sending)
# --------------------------------------------------------------------------------------------


def _time(value: float, name: str = "now") -> str:
    if type(value) is float and 0.0 <= value < math.inf:  # the common case: a clock's reading
        return repr(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise LocalProtocolError(f"{name} must be a finite number >= 0, not {value!r}")
    return repr(float(value))


def _number(value: float, name: str) -> str:
    if type(value) is float and -math.inf < value < math.inf:  # the common case
        return repr(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise LocalProtocolError(f"{name} must be finite, not {value!r}")
    return repr(float(value)) if isinstance(value, float) else str(value)


def _int(value: int, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is an int, not {type(value).__name__}")
    return str(value)


def _count(value: int, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is an int, not {type(value).__name__}")
    if value < 0:
        raise LocalProtocolError(f"{name} must be >= 0, not {value}")
    return str(value)


def _str(value: str, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} is a str, not {type(value).__name__}")
    return value


def _some(values: Sequence[str], name: str) -> list[str]:
    """At least one non-empty string (qless-core would hand Redis a command without members)."""
    if not values:
        raise LocalProtocolError(f"{name}: give at least one")
    return _names(values, name)


def _names(values: Sequence[str], name: str) -> list[str]:
    """A list of non-empty strings, order kept."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} is a sequence of str, not {type(values).__name__}")
    for value in values:
        if not isinstance(value, str) or not value:
            raise LocalProtocolError(f"{name} holds {value!r}, not a non-empty str")
    return list(values)


def _json_text(value: str, name: str) -> str:
    """JSON text qless-core's ``cjson.decode`` takes (it refuses anything else)."""
    _str(value, name)
    try:
        json.loads(value)
    except ValueError:
        raise LocalProtocolError(f"{name} must be JSON text, not {value[:40]!r}") from None
    return value


def day_of(when: float) -> int:
    """Midnight (UTC) of the day ``when`` falls in: the day of the stats hashes
    (``ql:s:<kind>:<day>:<queue>``) the script counts a call made at ``when`` in."""
    seconds = math.floor(float(_time(when, "when")))
    return seconds - seconds % _DAY


def _call(command: str, now: float, args: Sequence[str], decode: Callable[[Any], T]
          ) -> ScriptCall[T]:
    return ScriptCall(command, (command, _time(now), *args), decode)


# --------------------------------------------------------------------------------------------
# Decoders
# --------------------------------------------------------------------------------------------


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


def _list(value: Any, what: str) -> list[Any]:
    """A JSON list, where qless-core writes an empty one as ``{}``."""
    if value == {} or value is None:
        return []
    if not isinstance(value, list):
        raise RemoteProtocolError(f"the qless script answered {value!r:.80} for {what}, "
                                  "not a list")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"the qless script answered {value!r:.80} for {what}, "
                                  "not an object")
    return value


def _job(value: Any) -> JobData:
    job = _object(value, "a job")
    for key in ("tags", "history", "dependents", "dependencies"):
        job[key] = _list(job.get(key), key)
    if not job.get("failure"):
        job["failure"] = None
    job["queue"] = job.get("queue") or ""
    job["worker"] = job.get("worker") or ""
    job["expires"] = job.get("expires") or 0
    job["tracked"] = bool(job.get("tracked"))
    return job  # type: ignore[return-value]


def _job_reply(reply: Any) -> JobData | None:
    return None if reply is None else _job(_json(reply))


def _jobs_reply(reply: Any) -> list[JobData]:
    return [_job(j) for j in _list(_json(reply), "jobs")]


def _strings(reply: Any) -> list[str]:
    """A Redis array of strings (``jobs``, ``cancel``)."""
    if not isinstance(reply, list):
        raise RemoteProtocolError(f"the qless script answered {reply!r:.80}, not an array")
    return [_text(item) for item in reply]


def _json_strings(reply: Any) -> list[str]:
    return [str(v) for v in _list(_json(reply), "a list")]


def _int_reply(reply: Any) -> int:
    if isinstance(reply, bool) or not isinstance(reply, int):
        raise RemoteProtocolError(f"the qless script answered {reply!r:.80}, not an integer")
    return reply


def _bool_reply(reply: Any) -> bool:
    """Lua ``true`` (Redis: 1) or nothing."""
    return bool(reply == 1)


def _json_one(reply: Any) -> bool:
    """``track`` answers Redis's count as JSON text: ``"1"`` or ``"0"``."""
    return bool(_json(reply) == 1)


def _none(reply: Any) -> None:
    return None


def _scalar(value: Any) -> str:
    """A config value as text, whether the script answered a string or a number."""
    if isinstance(value, (bytes, str)):
        return _text(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RemoteProtocolError(f"the qless script answered {value!r:.80} for a config value")
    return str(value)


def _page(reply: Any) -> Page:
    page = _object(_json(reply), "a page")
    return {"total": int(page.get("total") or 0), "jobs": _list(page.get("jobs"), "jobs")}


def _tags_twice(reply: Any) -> list[str]:
    """``tag add`` answers its tags JSON-encoded twice (a JSON string of a JSON list)."""
    value = _json(reply)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise RemoteProtocolError(f"the qless script answered bad JSON: {exc}") from None
    return [str(v) for v in _list(value, "tags")]


def _tracked_reply(reply: Any) -> Tracked:
    value = _object(_json(reply), "tracked jobs")
    return {"jobs": [_job(j) for j in _list(value.get("jobs"), "jobs")],
            "expired": _list(value.get("expired"), "expired")}


def _queue_counts(value: Any) -> QueueCounts:
    counts = _object(value, "queue counts")
    counts["paused"] = bool(counts.get("paused"))
    return counts  # type: ignore[return-value]


def _worker_jobs(reply: Any) -> WorkerJobs:
    value = _object(_json(reply), "a worker's jobs")
    return {"jobs": _list(value.get("jobs"), "jobs"),
            "stalled": _list(value.get("stalled"), "stalled")}


def _recur_reply(reply: Any) -> RecurData | None:
    if reply is None:
        return None
    value = _object(_json(reply), "a recurring job")
    value["tags"] = _list(value.get("tags"), "tags")
    return value  # type: ignore[return-value]


def _expires(reply: Any) -> float:
    if isinstance(reply, bool) or not isinstance(reply, (int, float, bytes, str)):
        raise RemoteProtocolError(f"the qless script answered {reply!r:.80}, not a time")
    try:
        return float(reply)
    except ValueError:
        raise RemoteProtocolError(f"the qless script answered {reply!r:.80}, not a time"
                                  ) from None


# --------------------------------------------------------------------------------------------
# The commands, in the order of qless-core's api.lua
# --------------------------------------------------------------------------------------------


def get(now: float, jid: str) -> ScriptCall[JobData | None]:
    """``get <jid>``: the job, or None when there is no job ``jid``."""
    return _call("get", now, [_str(jid, "jid")], _job_reply)


def multiget(now: float, *jids: str) -> ScriptCall[list[JobData]]:
    """``multiget <jid>...``: the jobs that exist among ``jids``, in order."""
    return _call("multiget", now, [_str(j, "jid") for j in jids], _jobs_reply)


def config_get(now: float, option: str) -> ScriptCall[str | None]:
    """``config.get <option>``: its value (or qless-core's default) as text; None when neither
    exists."""
    return _call("config.get", now, [_str(option, "option")],
                 lambda reply: None if reply is None else _scalar(reply))


def config_get_all(now: float) -> ScriptCall[dict[str, str]]:
    """``config.get``: every option set, and the defaults of those not set (values as text)."""
    return _call("config.get", now, [],
                 lambda reply: {k: _scalar(v)
                                for k, v in _object(_json(reply), "the config").items()})


#: The options qless-core reads as numbers (with ``tonumber``: text there breaks every pop).
NUMERIC_OPTIONS = frozenset({"heartbeat", "grace-period", "stats-history", "histogram-history",
                             "jobs-history-count", "jobs-history", "max-worker-age"})
_NUMERIC_SUFFIXES = ("-heartbeat", "-max-concurrency")
_DECIMAL = re.compile(r"^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def config_set(now: float, option: str, value: str | int | float) -> ScriptCall[None]:
    """``config.set <option> <value>``: store an option. qless-core stores anything, and reads
    its own options (:data:`NUMERIC_OPTIONS`, ``<queue>-heartbeat``,
    ``<queue>-max-concurrency``) as numbers, so for those only a number is sent (a negative
    one too: a negative lock length expires locks at once, as in qless-core).

    Raises:
        LocalProtocolError: text that is not a number for one of qless-core's numeric options.
    """
    _str(option, "option")
    text = value if isinstance(value, str) else _number(value, option)
    if (option in NUMERIC_OPTIONS or option.endswith(_NUMERIC_SUFFIXES)) \
            and not _DECIMAL.match(text):
        raise LocalProtocolError(f"{option} is not a number: {text!r:.40}")
    return _call("config.set", now, [option, text], _none)


def config_unset(now: float, option: str) -> ScriptCall[None]:
    """``config.unset <option>``: forget an option (its default applies again)."""
    return _call("config.unset", now, [_str(option, "option")], _none)


def queues(now: float) -> ScriptCall[list[QueueCounts]]:
    """``queues``: the counts of every known queue, in the order they were first seen."""
    return _call("queues", now, [],
                 lambda reply: [_queue_counts(q) for q in _list(_json(reply), "queues")])


def queue(now: float, name: str) -> ScriptCall[QueueCounts]:
    """``queues <name>``: the counts of one queue."""
    return _call("queues", now, [_str(name, "queue")],
                 lambda reply: _queue_counts(_json(reply)))


def complete(
    now: float,
    jid: str,
    worker: str,
    queue: str,
    data: str,
    *,
    next: str | None = None,
    delay: float | None = None,
    depends: Sequence[str] | None = None,
) -> ScriptCall[str]:
    """``complete <jid> <worker> <queue> <data> [next <q>] [delay <s>] [depends <json>]``:
    ``worker`` finished ``jid``; the reply is the job's new state: ``complete``, or with
    ``next`` its state in that queue (``waiting``, ``scheduled`` after ``delay``, ``depends``
    on ``depends``). ``delay`` and ``depends`` go with ``next``, and not together."""
    return _complete(now, jid, worker, queue, data, next, delay, depends)


def _complete(
    now: float, jid: str, worker: str, queue: str, data: str, next: str | None,
    delay: float | None, depends: Sequence[str] | None, *, checked: bool = False,
) -> ScriptCall[str]:
    """``complete``; ``checked``: ``data`` is JSON text the client holds already checked (as
    the script stored it, or its serializer's output), not parsed again."""
    args = [_str(jid, "jid"), _str(worker, "worker"), _str(queue, "queue"),
            _str(data, "data") if checked else _json_text(data, "data")]
    if next is not None:
        args += ["next", _str(next, "next")]
    if delay is not None:
        args += ["delay", _number(delay, "delay")]
    if depends is not None:
        args += ["depends", json.dumps(_names(depends, "depends"))]
    return _call("complete", now, args, _text)


def failed_counts(now: float) -> ScriptCall[dict[str, int]]:
    """``failed``: how many jobs each failure group holds."""
    return _call("failed", now, [],
                 lambda reply: {k: int(v) for k, v in _object(_json(reply), "groups").items()})


def failed(now: float, group: str, start: int = 0, limit: int = 25) -> ScriptCall[Page]:
    """``failed <group> <start> <limit>``: the group's length and a page of its jids, the most
    recently failed first (qless-core reads ``limit`` as the last index + 1)."""
    args = [_str(group, "group"), _count(start, "start"), _count(limit, "limit")]
    return _call("failed", now, args, _page)


def fail(
    now: float, jid: str, worker: str, group: str, message: str, data: str | None = None
) -> ScriptCall[str]:
    """``fail <jid> <worker> <group> <message> [<data>]``: mark the running job ``jid`` failed
    in failure ``group`` with ``message`` (and new ``data``). The reply is the jid."""
    args = [_str(jid, "jid"), _str(worker, "worker"), _str(group, "group"),
            _str(message, "message")]
    if data is not None:
        args.append(_json_text(data, "data"))
    return _call("fail", now, args, _text)


def jobs(
    now: float, state: str, queue: str | None = None, offset: int = 0, count: int = 25
) -> ScriptCall[list[str]]:
    """``jobs <state> [<queue>] <offset> <count>``: a page of the jids of ``queue`` in
    ``state`` (``running``, ``stalled``, ``scheduled``, ``depends``, ``recurring``), or of all
    ``complete`` jobs, newest first (``queue`` None)."""
    if state not in _STATES:
        raise LocalProtocolError(f"state is one of {sorted(_STATES)}, not {state!r}")
    if (state == "complete") != (queue is None):
        raise LocalProtocolError("jobs takes a queue for every state but 'complete'")
    page = [_count(offset, "offset"), _count(count, "count")]
    if queue is None:
        return _call("jobs", now, [state, *page], _strings)
    return _call("jobs", now, [state, _str(queue, "queue"), *page], _strings)


def retry(
    now: float, jid: str, queue: str, worker: str, delay: float = 0,
    group: str | None = None, message: str | None = None,
) -> ScriptCall[int]:
    """``retry <jid> <queue> <worker> <delay> [<group> <message>]``: ``worker`` gives ``jid``
    back to ``queue`` (after ``delay``); one retry is used. The reply is the retries left;
    negative when none were left and the job failed (in ``group`` with ``message`` when given,
    else group ``failed-retries-<queue>``). With ``group`` and ``message`` the job also keeps
    them as its ``failure``."""
    args = [_str(jid, "jid"), _str(queue, "queue"), _str(worker, "worker"),
            _number(delay, "delay")]
    if (group is None) != (message is None):
        raise LocalProtocolError("retry takes group and message together")
    if group is not None and message is not None:
        args += [_str(group, "group"), _str(message, "message")]
    return _call("retry", now, args, _int_reply)


def depends_on(now: float, jid: str, *deps: str) -> ScriptCall[bool]:
    """``depends <jid> on <deps>``: ``jid`` (in state ``depends``) also waits for ``deps``."""
    return _call("depends", now, [_str(jid, "jid"), "on", *[_str(d, "jid") for d in deps]],
                 _bool_reply)


def depends_off(now: float, jid: str, *deps: str) -> ScriptCall[bool]:
    """``depends <jid> off <deps>``: ``jid`` stops waiting for ``deps`` (and is released to
    its queue's work when nothing is left)."""
    return _call("depends", now, [_str(jid, "jid"), "off", *[_str(d, "jid") for d in deps]],
                 _bool_reply)


def depends_off_all(now: float, jid: str) -> ScriptCall[bool]:
    """``depends <jid> off all``: ``jid`` stops waiting for anything."""
    return _call("depends", now, [_str(jid, "jid"), "off", "all"], _bool_reply)


def heartbeat(now: float, jid: str, worker: str, data: str | None = None) -> ScriptCall[float]:
    """``heartbeat <jid> <worker> [<data>]``: ``worker`` renews its lock on ``jid`` (and
    replaces its ``data``); the reply is the lock's new expiry time (Redis answers whole
    seconds)."""
    args = [_str(jid, "jid"), _str(worker, "worker")]
    if data is not None:
        args.append(_json_text(data, "data"))
    return _call("heartbeat", now, args, _expires)


def workers(now: float) -> ScriptCall[list[WorkerSummary]]:
    """``workers``: every worker seen within ``max-worker-age``, the most recent first."""
    return _call("workers", now, [], lambda reply: _list(_json(reply), "workers"))


def worker(now: float, name: str) -> ScriptCall[WorkerJobs]:
    """``workers <name>``: the jobs one worker holds, live and stalled."""
    return _call("workers", now, [_str(name, "worker")], _worker_jobs)


def track(now: float, jid: str) -> ScriptCall[bool]:
    """``track track <jid>``: add ``jid`` to ``ql:tracked``; True if it was not tracked yet."""
    return _call("track", now, ["track", _str(jid, "jid")], _json_one)


def untrack(now: float, jid: str) -> ScriptCall[bool]:
    """``track untrack <jid>``: remove ``jid`` from ``ql:tracked``; True if it was tracked."""
    return _call("track", now, ["untrack", _str(jid, "jid")], _json_one)


def tracked(now: float) -> ScriptCall[Tracked]:
    """``track``: the tracked jobs, and the tracked jids whose job is gone."""
    return _call("track", now, [], _tracked_reply)


def tag_add(now: float, jid: str, *tags: str) -> ScriptCall[list[str]]:
    """``tag add <jid> <tag>...``: add ``tags`` to ``jid``; the reply is its tags."""
    return _call("tag", now, ["add", _str(jid, "jid"), *_names(tags, "tags")], _tags_twice)


def tag_remove(now: float, jid: str, *tags: str) -> ScriptCall[list[str]]:
    """``tag remove <jid> <tag>...``: remove ``tags`` from ``jid``; the reply is its tags."""
    return _call("tag", now, ["remove", _str(jid, "jid"), *_names(tags, "tags")], _json_strings)


def tag_get(now: float, tag: str, offset: int = 0, count: int = 25) -> ScriptCall[Page]:
    """``tag get <tag> <offset> <count>``: how many jobs carry ``tag`` and a page of them,
    oldest tagging first (qless-core reads ``count`` as the last index)."""
    args = ["get", _str(tag, "tag"), _count(offset, "offset"), _count(count, "count")]
    return _call("tag", now, args, _page)


def tag_top(now: float, offset: int = 0, count: int = 25) -> ScriptCall[list[str]]:
    """``tag top <offset> <count>``: the tags most jobs carry, most first (tags on fewer than
    two jobs are left out, as qless-core does)."""
    return _call("tag", now, ["top", _count(offset, "offset"), _count(count, "count")],
                 _json_strings)


def stats(now: float, queue: str, date: float) -> ScriptCall[Stats]:
    """``stats <queue> <date>``: ``queue``'s statistics for the (UTC) day of ``date``."""
    def decode(reply: Any) -> Stats:
        value = _object(_json(reply), "stats")
        for kind in ("wait", "run"):
            summary = _object(value.get(kind), kind)
            summary["histogram"] = _list(summary.get("histogram"), "histogram")
        return value  # type: ignore[return-value]
    return _call("stats", now, [_str(queue, "queue"), _time(date, "date")], decode)


def priority(now: float, jid: str, value: float) -> ScriptCall[int]:
    """``priority <jid> <priority>``: set ``jid``'s priority (higher is popped sooner; a waiting
    job moves in its queue). The reply is the priority (Redis answers it whole)."""
    return _call("priority", now, [_str(jid, "jid"), _number(value, "priority")], _int_reply)


def log(now: float, jid: str, message: str, data: dict[str, Any] | None = None
        ) -> ScriptCall[None]:
    """``log <jid> <message> [<data>]``: append an event ``message`` (with the fields of
    ``data``, a JSON object) to ``jid``'s history."""
    args = [_str(jid, "jid"), _str(message, "message")]
    if data is not None:
        if not isinstance(data, dict):
            raise TypeError(f"log data is a dict, not {type(data).__name__}")
        try:
            args.append(json.dumps(data, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise LocalProtocolError(f"log data is not JSON: {exc}") from None
    return _call("log", now, args, _none)


def peek(now: float, queue: str, count: int = 1) -> ScriptCall[list[JobData]]:
    """``peek <queue> <count>``: the jobs ``pop`` would hand out next, without locking them."""
    return _call("peek", now, [_str(queue, "queue"), _count(count, "count")], _jobs_reply)


def pop(now: float, queue: str, worker: str, count: int = 1) -> ScriptCall[list[JobData]]:
    """``pop <queue> <worker> <count>``: lock up to ``count`` jobs of ``queue`` for
    ``worker``: jobs whose lock expired (after qless-core's grace period), then recurring and
    scheduled jobs that came due, then waiting jobs by priority (highest first) and time put.
    A paused queue gives none; ``<queue>-max-concurrency`` caps the jobs running at once."""
    args = [_str(queue, "queue"), _str(worker, "worker"), _count(count, "count")]
    return _call("pop", now, args, _jobs_reply)


def pause(now: float, *queues: str) -> ScriptCall[None]:
    """``pause <queue>...``: ``pop`` hands out no job of these queues until ``unpause``."""
    return _call("pause", now, _some(queues, "queues"), _none)


def unpause(now: float, *queues: str) -> ScriptCall[None]:
    """``unpause <queue>...``."""
    return _call("unpause", now, _some(queues, "queues"), _none)


def cancel(now: float, *jids: str) -> ScriptCall[list[str]]:
    """``cancel <jid>...``: delete jobs and every trace of them; the reply is the jids given.
    Refused while a job not cancelled with them depends on one."""
    return _call("cancel", now, [_str(j, "jid") for j in jids],
                 lambda reply: [] if reply is None or reply == {} else _strings(reply))


def timeout(now: float, *jids: str) -> ScriptCall[None]:
    """``timeout <jid>...``: end the locks of these running jobs now (they are ``stalled``, and
    the next ``pop`` of their queue hands them out again)."""
    return _call("timeout", now, [_str(j, "jid") for j in jids], _none)


def put(
    now: float,
    queue: str,
    jid: str,
    klass: str,
    data: str,
    delay: float = 0,
    *,
    priority: float | None = None,
    tags: Sequence[str] | None = None,
    retries: int | None = None,
    depends: Sequence[str] | None = None,
) -> ScriptCall[str]:
    """``put <queue> <jid> <klass> <data> <delay> [priority <p>] [tags <json>] [retries <n>]
    [depends <json>]``: create job ``jid`` in ``queue`` (or move it there); the reply is the
    jid.

    ``data`` is JSON text. ``priority`` (higher is popped sooner, default 0), ``tags``,
    ``retries`` (default 5) left out keep a moved job's own. With ``depends`` the job waits for
    those jobs (state ``depends``); with ``delay`` it is ``scheduled`` that many seconds; the
    two exclude each other.
    """
    return _put("put", now, queue, jid, klass, data, delay, priority, tags, retries, depends)


def requeue(
    now: float,
    queue: str,
    jid: str,
    klass: str,
    data: str,
    delay: float = 0,
    *,
    priority: float | None = None,
    tags: Sequence[str] | None = None,
    retries: int | None = None,
    depends: Sequence[str] | None = None,
) -> ScriptCall[str]:
    """``requeue``, with ``put``'s arguments: move the existing job ``jid`` into ``queue``
    (as ``put`` does), refused for a jid no job has (``put`` would create it)."""
    return _put("requeue", now, queue, jid, klass, data, delay, priority, tags, retries,
                depends)


def _put(
    command: str, now: float, queue: str, jid: str, klass: str, data: str, delay: float,
    priority: float | None, tags: Sequence[str] | None, retries: int | None,
    depends: Sequence[str] | None, *, checked: bool = False,
) -> ScriptCall[str]:
    """``put`` or ``requeue``; ``checked``: ``data`` is JSON text the client wrote itself (its
    serializer's output, already checked), not parsed again."""
    args = [_str(queue, "queue"), _str(jid, "jid"), _str(klass, "klass"),
            _str(data, "data") if checked else _json_text(data, "data"), _number(delay, "delay")]
    if priority is not None:
        args += ["priority", _number(priority, "priority")]
    if tags is not None:
        args += ["tags", json.dumps(_names(tags, "tags"))]
    if retries is not None:
        args += ["retries", _int(retries, "retries")]
    if depends is not None:
        args += ["depends", json.dumps(_names(depends, "depends"))]
    return _call(command, now, args, _text)


def unfail(now: float, queue: str, group: str, count: int = 25) -> ScriptCall[int]:
    """``unfail <queue> <group> <count>``: move the ``count`` oldest jobs of failure ``group``
    to ``queue``; the reply is how many moved."""
    args = [_str(queue, "queue"), _str(group, "group"), _count(count, "count")]
    return _call("unfail", now, args, _int_reply)


def recur(
    now: float,
    queue: str,
    jid: str,
    klass: str,
    data: str,
    interval: float,
    offset: float = 0,
    *,
    priority: float = 0,
    tags: Sequence[str] = (),
    retries: int = 5,
    backlog: int = 0,
) -> ScriptCall[str]:
    """``recur <queue> <jid> <klass> <data> interval <interval> <offset> [priority <p>]
    [tags <json>] [retries <n>] [backlog <n>]``: a template that puts job ``<jid>-<n>`` in
    ``queue`` every ``interval`` seconds, the first ``offset`` seconds from ``now`` (spawned
    when the queue is popped or peeked; ``backlog`` > 0 caps how many missed runs are made
    up). Recurring an existing template keeps its count. The reply is the jid."""
    args = [_str(queue, "queue"), _str(jid, "jid"), _str(klass, "klass"),
            _json_text(data, "data"), "interval", _number(interval, "interval"),
            _number(offset, "offset"), "priority", _number(priority, "priority"),
            "tags", json.dumps(_names(tags, "tags")), "retries", _int(retries, "retries"),
            "backlog", _int(backlog, "backlog")]
    return _call("recur", now, args, _text)


def unrecur(now: float, jid: str) -> ScriptCall[bool]:
    """``unrecur <jid>``: delete a recurring template (jobs it spawned stay). qless-core
    answers true whether or not it existed."""
    return _call("unrecur", now, [_str(jid, "jid")], _bool_reply)


def recur_get(now: float, jid: str) -> ScriptCall[RecurData | None]:
    """``recur.get <jid>``: a recurring template, or None."""
    return _call("recur.get", now, [_str(jid, "jid")], _recur_reply)


def recur_update(now: float, jid: str, **fields: str | float) -> ScriptCall[bool]:
    """``recur.update <jid> <field> <value>...``: change a template's ``priority``,
    ``interval`` (its next run moves by the difference), ``retries``, ``data`` (JSON text),
    ``klass``, ``queue`` or ``backlog``."""
    if not fields:
        raise LocalProtocolError("recur.update takes at least one field")
    args = [_str(jid, "jid")]
    for key, value in fields.items():
        if key not in _RECUR_FIELDS:
            raise LocalProtocolError(f"recur.update field is one of {sorted(_RECUR_FIELDS)}, "
                                     f"not {key!r}")
        if key in ("klass", "queue"):
            text = _str(value, key)  # type: ignore[arg-type]
        elif key == "data":
            text = _json_text(value, key)  # type: ignore[arg-type]
        else:
            text = _number(value, key)  # type: ignore[arg-type]
        args += [key, text]
    return _call("recur.update", now, args, _bool_reply)


def recur_tag(now: float, jid: str, *tags: str) -> ScriptCall[list[str]]:
    """``recur.tag <jid> <tag>...``: add tags to a template; the reply is its tags."""
    return _call("recur.tag", now, [_str(jid, "jid"), *_names(tags, "tags")], _json_strings)


def recur_untag(now: float, jid: str, *tags: str) -> ScriptCall[list[str]]:
    """``recur.untag <jid> <tag>...``: remove tags from a template; the reply is its tags."""
    return _call("recur.untag", now, [_str(jid, "jid"), *_names(tags, "tags")], _json_strings)


def length(now: float, queue: str) -> ScriptCall[int]:
    """``length <queue>``: jobs running (stalled too), waiting and scheduled in ``queue``."""
    return _call("length", now, [_str(queue, "queue")], _int_reply)


def worker_deregister(now: float, *names: str) -> ScriptCall[None]:
    """``worker.deregister <worker>...``: forget workers (``workers`` lists them no more)."""
    return _call("worker.deregister", now, _some(names, "workers"), _none)


def queue_forget(now: float, *names: str) -> ScriptCall[None]:
    """``queue.forget <queue>...``: drop queues from the known queues (``queues``); their jobs
    stay."""
    return _call("queue.forget", now, _some(names, "queues"), _none)
