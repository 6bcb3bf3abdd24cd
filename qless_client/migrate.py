"""Move qless data written by jobwire's first script (before 0.2: the layout of the qless-core
*document*) to the layout of the qless-core *code* that every binding runs, so qless-py, the
Ruby gem, the web UI and jobwire's current script all read and act on it.

Run it once, with every worker and producer stopped (old script and new script must not run
side by side), against each Redis database that holds qless::

    from qless_client.migrate import migrate
    report = migrate("redis://127.0.0.1:6379/0")          # or a connected sync Client
    print(report)                                         # what it changed, by kind

or ``jobwire qless migrate --url redis://... [--dry-run]``. It is idempotent: a second run
changes nothing (every rule below recognises data it already moved), and data that qless-core
wrote is left as it is. ``dry_run=True`` reads everything and counts what it would change,
writing nothing.

What it sends: ``SCAN ... TYPE hash|zset`` over ``ql:j:*``, ``ql:q:*-work``, ``ql:w:*:jobs``,
``ql:s:wait:*``, ``ql:s:run:*``; ``HGETALL``/``ZRANGE ... WITHSCORES`` of what it found; and
its writes in ``MULTI``/``EXEC`` blocks (one per job, work set, worker set or stats hash, so a
reader never sees half a job). The rules:

* **History.** The old ``history`` hash field (stages ``{q, put, popped, worker, done,
  failed}``, ``put`` missing when the job had been put by another binding) becomes events
  appended (``RPUSH``) to the list ``ql:j:<jid>-history``, each ``[when, what, {...}]`` as
  qless-core writes them: ``put {q}``, ``popped {worker}``, ``failed``, ``done``; ``when``
  floored to whole seconds; a stage without ``put`` gets no put event. The field is deleted
  (``HDEL``). Events qless-core had already appended to the list stay before them. This is
  what qless-core's own conversion (on a job's next read or write) does, and what jobwire's
  script does too, except for a stage without ``put``, on which qless-core fails
  (``bad argument #1 to 'floor'``): the migration makes such jobs readable by qless-core.
* **time.** qless-core measures wait and run from the hash field ``time`` (the last put or
  pop), which the old script never wrote. It is set to the latest ``put``, ``popped`` or
  ``done`` of the old history when that is later than what ``time`` holds, as
  ``%.20f`` text like qless-core's.
* **Pop order.** The old script scored waiting jobs ``priority + put_time/1e10`` and popped the
  *lowest* first; qless-core scores ``priority - put_time/1e10`` and pops the *highest* first.
  Every job **keeps its priority number** and is rescored (``2*priority - score``: the same
  put time, mirrored), which is what a qless-core user expects of a number: after migration
  priority 5 pops before priority 0, where the old script popped it after. A deployment whose
  producers chose numbers for "lower is sooner" flips their signs (``priority`` of each job,
  and in the producers). Among equal priorities the order stays first put, first popped. Old
  scores are told from qless-core's by their sign: ``score - priority`` is ``+t/1e10`` in the
  old layout, ``-t/1e10`` in qless-core's, so already-moved entries are left alone.
* **Worker sets.** ``ql:w:<worker>:jobs`` was scored by the last pop or heartbeat; qless-core
  scores each running job by its lock expiry (``workers`` counts the ones not expired as
  running). Running jobs held by the set's worker are rescored to their ``expires``.
* **Tag counts.** ``ql:tags`` (qless-core's ``tag top``) is set to the number of job hashes
  carrying each tag; a tag no job carries any more is set to 0.
* **Histograms.** The old 287 buckets become qless-core's: ``s0``-``s59`` and ``m1``-``m59``
  are the same fields; the quarter hours ``q4``-``q95`` add into the hours ``h1``-``h23``
  (``q<k>`` -> ``h<k//4>``), the hours of the second and third day ``h24``-``h71`` into
  ``d1``/``d2`` (``h<k>`` -> ``d<k//24>``); ``d3``-``d30`` stay (``d30`` also held anything
  longer, so longer waits stay counted there). ``total``, ``mean`` and ``vk`` are the same.
* **Recurring counters.** A template whose ``count`` is below the highest ``<jid>-<n>`` job
  it spawned (a template the old script re-``recur``-ed restarted from 0) gets that ``n``, so
  its next run cannot overwrite a job that exists.
* **Config.** The old per-queue lock length ``heartbeat-<queue>`` is qless-core's
  ``<queue>-heartbeat``: renamed (kept as it is when the new name is already set, then only
  the old one is deleted).

Anything else the old script wrote (job fields, queue sets but ``-work``, ``ql:queues``,
``ql:workers``, ``ql:f:*``, ``ql:failures``, ``ql:completed``, ``ql:tracked``, ``ql:t:*``,
``ql:r:*``, ``ql:s:stats:*``) already has qless-core's layout.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

from jobwire.errors import LocalProtocolError

from ._client_sync import Client
from ._redis import Redis
from ._resp import Arg

__all__ = ["MigrationReport", "migrate"]

_SCAN_COUNT = 1000
_DAY_BUCKET = re.compile(r"h(\d+)")
_QUARTER_BUCKET = re.compile(r"q(\d+)")
_SPAWNED = re.compile(r"(.+)-(\d+)")


@dataclass
class MigrationReport:
    """What :func:`migrate` changed (or, with ``dry_run``, would change), by kind."""

    #: Job hashes read.
    jobs: int = 0
    #: ``history`` fields moved to ``ql:j:<jid>-history`` lists.
    histories: int = 0
    #: ``time`` fields written.
    times: int = 0
    #: Waiting jobs rescored in their queue's ``-work`` set.
    work_scores: int = 0
    #: Running jobs rescored in their worker's ``ql:w:<worker>:jobs`` set.
    worker_scores: int = 0
    #: ``ql:tags`` counts set.
    tag_counts: int = 0
    #: Stats hashes whose old histogram buckets were moved.
    histograms: int = 0
    #: Recurring templates whose ``count`` was raised.
    recur_counts: int = 0
    #: ``heartbeat-<queue>`` options renamed.
    config: int = 0

    @property
    def changed(self) -> int:
        """Everything changed, all kinds together (``jobs`` is what was read, not counted)."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name != "jobs")


def _text(value: object) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _pairs(reply: Sequence[Any]) -> dict[str, str]:
    return {_text(reply[i]): _text(reply[i + 1]) for i in range(0, len(reply) - 1, 2)}


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


class _Migration:
    def __init__(self, redis: Redis, dry_run: bool) -> None:
        self.redis = redis
        self.dry_run = dry_run
        self.report = MigrationReport()
        self.tag_counts: dict[str, int] = {}
        self.spawned: dict[str, int] = {}  # template jid -> highest n of its jobs

    # -- Redis ----------------------------------------------------------------------------

    def scan(self, pattern: str, kind: str) -> Iterator[str]:
        cursor = "0"
        seen: set[str] = set()
        while True:
            reply = self.redis.execute("SCAN", cursor, "MATCH", pattern, "COUNT", _SCAN_COUNT,
                                       "TYPE", kind)
            cursor = _text(reply[0])
            for key in reply[1]:
                name = _text(key)
                if name not in seen:  # SCAN may return a key twice
                    seen.add(name)
                    yield name
            if cursor == "0":
                return

    def write(self, commands: list[tuple[Arg, ...]]) -> None:
        if commands and not self.dry_run:
            self.redis.pipeline([("MULTI",), *commands, ("EXEC",)])

    # -- the rules ------------------------------------------------------------------------

    def run(self) -> MigrationReport:
        self.config()
        for key in self.scan("ql:j:*", "hash"):
            self.job(key[len("ql:j:"):])
        for key in self.scan("ql:q:*-work", "zset"):
            self.work(key)
        for key in self.scan("ql:w:*:jobs", "zset"):
            self.worker(key, key[len("ql:w:"):-len(":jobs")])
        self.tags()
        self.recurring()
        for kind in ("wait", "run"):
            for key in self.scan(f"ql:s:{kind}:*", "hash"):
                self.histogram(key)
        return self.report

    def config(self) -> None:
        options = _pairs(self.redis.execute("HGETALL", "ql:config"))
        commands: list[tuple[Arg, ...]] = []
        for name, value in options.items():
            if name.startswith("heartbeat-") and len(name) > len("heartbeat-"):
                new = f"{name[len('heartbeat-'):]}-heartbeat"
                if new not in options:
                    commands.append(("HSET", "ql:config", new, value))
                commands.append(("HDEL", "ql:config", name))
                self.report.config += 1
        self.write(commands)

    def job(self, jid: str) -> None:
        job = _pairs(self.redis.execute("HGETALL", f"ql:j:{jid}"))
        if "state" not in job and "jid" not in job:
            return
        self.report.jobs += 1
        tags = _decode_list(job.get("tags")) or []
        for tag in dict.fromkeys(t for t in tags if isinstance(t, str)):
            self.tag_counts[tag] = self.tag_counts.get(tag, 0) + 1
        parent = job.get("spawned_from_jid")
        spawned = _SPAWNED.fullmatch(jid)
        if parent and spawned and spawned.group(1) == parent:
            n = int(spawned.group(2))
            self.spawned[parent] = max(self.spawned.get(parent, 0), n)
        if "history" not in job:
            return
        stages = _decode_list(job["history"])
        if stages is None:
            return  # not the old script's JSON: left for a person to look at
        commands: list[tuple[Arg, ...]] = []
        events = _events(stages)
        if events:
            commands.append(("RPUSH", f"ql:j:{jid}-history", *events))
        commands.append(("HDEL", f"ql:j:{jid}", "history"))
        self.report.histories += 1
        latest = _latest(stages)
        current = _number(job.get("time"))
        if latest is not None and (current is None or latest > current):
            commands.append(("HSET", f"ql:j:{jid}", "time", f"{latest:.20f}"))
            self.report.times += 1
        self.write(commands)

    def work(self, key: str) -> None:
        reply = self.redis.execute("ZRANGE", key, 0, -1, "WITHSCORES")
        members = [(_text(reply[i]), float(reply[i + 1])) for i in range(0, len(reply), 2)]
        if not members:
            return
        priorities = self.redis.pipeline([("HGET", f"ql:j:{jid}", "priority")
                                          for jid, _ in members])
        commands: list[tuple[Arg, ...]] = []
        for (jid, score), raw in zip(members, priorities, strict=True):
            priority = _number(None if raw is None else _text(raw))
            if priority is None or not math.isfinite(score) or score - priority <= 0:
                continue  # no such job, or scored as qless-core scores
            commands.append(("ZADD", key, repr(2 * priority - score), jid))
            self.report.work_scores += 1
        self.write(commands)

    def worker(self, key: str, name: str) -> None:
        reply = self.redis.execute("ZRANGE", key, 0, -1, "WITHSCORES")
        members = [(_text(reply[i]), float(reply[i + 1])) for i in range(0, len(reply), 2)]
        if not members:
            return
        jobs = self.redis.pipeline([("HMGET", f"ql:j:{jid}", "state", "worker", "expires")
                                    for jid, _ in members])
        commands: list[tuple[Arg, ...]] = []
        for (jid, score), (state, worker, expires) in zip(members, jobs, strict=True):
            at = _number(None if expires is None else _text(expires))
            if (state is None or _text(state) != "running" or worker is None
                    or _text(worker) != name or at is None or at == score):
                continue
            commands.append(("ZADD", key, repr(at), jid))
            self.report.worker_scores += 1
        self.write(commands)

    def tags(self) -> None:
        reply = self.redis.execute("ZRANGE", "ql:tags", 0, -1, "WITHSCORES")
        stored = {_text(reply[i]): float(reply[i + 1]) for i in range(0, len(reply), 2)}
        commands: list[tuple[Arg, ...]] = []
        for tag in sorted(set(stored) | set(self.tag_counts)):
            count = self.tag_counts.get(tag, 0)
            if stored.get(tag) != count and (count or tag in stored):
                commands.append(("ZADD", "ql:tags", count, tag))
                self.report.tag_counts += 1
        self.write(commands)

    def recurring(self) -> None:
        templates = sorted(self.spawned)
        if not templates:
            return
        counts = self.redis.pipeline([("HGET", f"ql:r:{jid}", "count") for jid in templates])
        commands: list[tuple[Arg, ...]] = []
        for jid, raw in zip(templates, counts, strict=True):
            if raw is None:
                continue  # the template is gone (unrecur): its jobs stay
            count = _number(_text(raw)) or 0
            if count < self.spawned[jid]:
                commands.append(("HSET", f"ql:r:{jid}", "count", self.spawned[jid]))
                self.report.recur_counts += 1
        self.write(commands)

    def histogram(self, key: str) -> None:
        values = _pairs(self.redis.execute("HGETALL", key))
        moves: dict[str, int] = {}
        old: list[str] = []
        for name, value in values.items():
            target = _new_bucket(name)
            if target is None:
                continue
            old.append(name)
            moves[target] = moves.get(target, 0) + int(float(value))
        if not old:
            return
        commands: list[tuple[Arg, ...]] = [("HINCRBY", key, name, n)
                                           for name, n in sorted(moves.items())]
        commands.append(("HDEL", key, *sorted(old)))
        self.report.histograms += 1
        self.write(commands)


def _decode_list(text: str | None) -> list[Any] | None:
    if text is None:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and not value:
        return []  # cjson's empty list
    return value if isinstance(value, list) else None


def _events(stages: list[Any]) -> list[str]:
    """The old stages as qless-core's ``-history`` list entries, in order (what qless-core's
    own conversion, and jobwire's script, write for them)."""
    out: list[str] = []
    for stage in stages:
        if not isinstance(stage, dict):
            continue
        for field, what, item in (
            ("put", "put", {"q": stage.get("q")}),
            ("popped", "popped", {"worker": stage.get("worker")}),
            ("failed", "failed", None),
            ("done", "done", None),
        ):
            when = stage.get(field)
            if isinstance(when, (int, float)) and not isinstance(when, bool):
                entry: list[Any] = [math.floor(when), what]
                if item is not None:
                    entry.append({k: v for k, v in item.items() if isinstance(v, str)})
                out.append(json.dumps(entry, separators=(",", ":")))
    return out


def _latest(stages: list[Any]) -> float | None:
    """The latest put, pop or completion time in the old stages."""
    times = [stage[field] for stage in stages if isinstance(stage, dict)
             for field in ("put", "popped", "done")
             if isinstance(stage.get(field), (int, float)) and not isinstance(stage[field], bool)]
    return max(times) if times else None


def _new_bucket(name: str) -> str | None:
    """qless-core's histogram field for an old-only field name, or None for a shared one."""
    quarter = _QUARTER_BUCKET.fullmatch(name)
    if quarter:
        return f"h{int(quarter.group(1)) // 4}"
    hour = _DAY_BUCKET.fullmatch(name)
    if hour and int(hour.group(1)) >= 24:
        return f"d{int(hour.group(1)) // 24}"
    return None


def migrate(target: Client[Any] | Redis | str, *, dry_run: bool = False) -> MigrationReport:
    """Move the data of jobwire's first qless script to qless-core's layout (the rules are in
    this module's docstring) and return what changed.

    Args:
        target: a connected sync :class:`~qless_client.Client`, a
            :class:`~qless_client.Redis`, or a Redis URL (connected and closed here).
        dry_run: read and count only; send no write.

    Raises:
        LocalProtocolError: ``target`` is none of those (nothing is sent).
        InvalidAddress, ConnectFailed: the URL is bad or the server unreachable.
        RedisError, BulkError: the server refused a command. What was sent before stays
            done; running the migration again finishes the job.
    """
    if isinstance(target, Client):
        return _Migration(target.redis, dry_run).run()
    if isinstance(target, Redis):
        return _Migration(target, dry_run).run()
    if isinstance(target, str):
        with Redis.from_url(target) as redis:
            return _Migration(redis, dry_run).run()
    raise LocalProtocolError(
        f"migrate takes a Client, a Redis or a URL, not {type(target).__name__}")
