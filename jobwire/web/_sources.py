"""One :class:`Source` per server the dashboard shows: what it reads from the server (through the
protocol packages' public async clients only) and the actions it runs there.

Each source keeps one connection, opened on first use, used by one request at a time (a lock),
and dropped when it breaks: the next request opens a new one, so a restarted server is picked up.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any, ClassVar

import anyio

from jobwire._url import redact, resolve_address, split_url
from jobwire.errors import InvalidAddress, JobwireConnectionError, OperationTimeout

from ._views import (
    Action,
    Column,
    FailedGroup,
    FailedView,
    Histogram,
    JobRow,
    JobView,
    Overview,
    QueueView,
)

#: Jobs on a page of a listing.
PAGE = 25
#: How much of a body a listing shows.
SUMMARY = 80
#: Seconds a server may take to answer.
TIMEOUT = 10.0
#: qless: the states a queue's jobs can be listed in (``waiting`` by peeking).
QLESS_STATES = ("waiting", "running", "stalled", "scheduled", "depends", "recurring")

_SCHEMES = {
    "beanstalk": ("beanstalk", "beanstalkd", "beanstalk+unix", "beanstalkd+unix"),
    "gearman": ("gearman",),
    "workq": ("workq", "workq+unix"),
    "qless": ("redis", "rediss", "redis+unix"),
}


class ActionError(Exception):
    """An action the form asked for that this source does not have, or with a bad field."""


def text(value: bytes | str, limit: int | None = None) -> str:
    """A body or name for a page: UTF-8 as text (other bytes as a ``repr``), control
    characters but newlines and tabs escaped; cut to ``limit`` with ``...``."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            value = repr(value)
    cut = limit is not None and len(value) > limit
    value = value[:limit] if limit is not None else value
    value = "".join(
        ch if ch in "\n\t" or (ord(ch) >= 0x20 and not 0x7F <= ord(ch) < 0xA0)
        else f"\\x{ord(ch):02x}" for ch in value
    )
    return value + ("..." if cut else "")


def when(value: datetime | float | None) -> str:
    """A time as ``2024-05-01 12:00:00Z`` (UTC); ``""`` for none."""
    if value is None or value == 0:
        return ""
    if not isinstance(value, datetime):
        value = datetime.fromtimestamp(value, timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _number(params: Mapping[str, str], key: str, low: int = 0, high: int = 2**32 - 1) -> int:
    try:
        value = int(params.get(key, ""))
    except ValueError:
        raise ActionError(f"{key} must be a whole number") from None
    if not low <= value <= high:
        raise ActionError(f"{key} must be {low} to {high}")
    return value


def _field(params: Mapping[str, str], key: str) -> str:
    value = params.get(key, "")
    if not value:
        raise ActionError(f"no {key} given")
    return value


class Source:
    """A server of one system: its overview, queue, job and failed pages, and its actions.

    Args:
        url: the server's address (a URL whose scheme names the system).
    """

    system: ClassVar[str]
    #: What a queue is called there (tube, function, queue).
    kind: ClassVar[str] = "queue"
    #: Whether the server keeps failed (buried) jobs the dashboard can list.
    has_failed: ClassVar[bool] = False
    #: Whether a job can be looked up by its id.
    has_jobs: ClassVar[bool] = True

    #: The protocol's default port (its URLs are checked with it).
    port: ClassVar[int] = 0

    def __init__(self, url: str) -> None:
        self.check(url)
        self.url = url
        #: The address as shown: any password written as ``***``.
        self.label = redact(url)
        self._client: Any = None
        self._lock = anyio.Lock()

    def check(self, url: str) -> None:
        """Refuse an address the client would refuse, now rather than on the first page.

        Raises:
            InvalidAddress: a malformed address (a port out of range...).
        """
        resolve_address(url, scheme=self.system, default_port=self.port)

    async def _open(self) -> Any:
        raise NotImplementedError

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Any]:
        """The source's connection, for one request at a time; a connection that broke (or
        timed out) is closed and opened anew by the next request."""
        async with self._lock:
            if self._client is None:
                self._client = await self._open()
            try:
                yield self._client
            except (JobwireConnectionError, OperationTimeout, OSError):
                await self.aclose_unlocked()
                raise

    async def aclose_unlocked(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    async def aclose(self) -> None:
        """Close the connection (if open)."""
        async with self._lock:
            await self.aclose_unlocked()

    async def overview(self) -> Overview:
        """The server's queues with their numbers."""
        raise NotImplementedError

    async def queue(self, name: str, state: str | None, offset: int) -> QueueView:
        """One queue's page."""
        raise NotImplementedError

    async def job(self, job_id: str) -> JobView | None:
        """One job, or None when the server has no such job."""
        return None

    async def failed(self, group: str | None, offset: int) -> FailedView:
        """Failed (buried) jobs, grouped."""
        return FailedView([], note=f"{self.system} keeps no failed jobs to list.")

    async def act(self, verb: str, params: Mapping[str, str]) -> str:
        """Run action ``verb``; return what was done, in words.

        Raises:
            ActionError: no such action here, or a missing or bad field.
            JobwireError: the server refused it (a job not found...).
        """
        raise ActionError(f"{self.system} has no action {verb!r}")


# -- beanstalk --------------------------------------------------------------------------------

_TUBE_COUNTS = (("ready", "current-jobs-ready"), ("reserved", "current-jobs-reserved"),
                ("delayed", "current-jobs-delayed"), ("buried", "current-jobs-buried"))


class BeanstalkSource(Source):
    system = "beanstalk"
    kind = "tube"
    port = 11300
    has_failed = True

    async def _open(self) -> Any:
        from beanstalk_client import AsyncClient

        client = AsyncClient(self.url, timeout=TIMEOUT)
        await client.connect()
        return client

    async def overview(self) -> Overview:
        columns = [Column(title, key) for title, key in _TUBE_COUNTS]
        columns += [Column("urgent", "current-jobs-urgent"),
                    Column("workers waiting", "current-waiting"),
                    Column("puts/s", "total-jobs", rate=True),
                    Column("deletes/s", "cmd-delete", rate=True)]
        keys = [c.key for c in columns]
        async with self.client() as client:
            found = [await self._tube_stats(client, tube) for tube in await client.list_tubes()]
        tubes = [s for s in found if s is not None]
        return Overview(columns, {str(s["name"]): {k: int(s[k]) for k in keys} for s in tubes},
                        {str(s["name"]) for s in tubes if s["pause-time-left"]})

    @staticmethod
    async def _tube_stats(client: Any, tube: str) -> dict[str, Any] | None:
        from beanstalk_client import NotFound

        try:
            return dict(await client.stats_tube(tube))
        except NotFound:  # gone since list-tubes
            return None

    async def _job(self, client: Any, job: Any) -> JobView | None:
        from beanstalk_client import NotFound

        try:
            stats = dict(await client.stats_job(job.id))
        except NotFound:
            return None
        state = str(stats.get("state", "?"))
        actions = []
        if state in ("buried", "delayed"):
            actions.append(Action("kick-job", "Kick", {"job": str(job.id)}))
        if state != "reserved":
            actions.append(Action("delete", "Delete", {"job": str(job.id)},
                                  confirm=f"Delete job {job.id}?"))
        fields = [(k, str(v)) for k, v in stats.items() if k not in ("id", "state")]
        return JobView(str(job.id), state, fields, text(job.body), actions=actions)

    async def queue(self, name: str, state: str | None, offset: int) -> QueueView:
        from beanstalk_client import NotFound

        peeks: list[tuple[str, JobView | None]] = []
        async with self.client() as client:
            try:
                stats = dict(await client.stats_tube(name))
            except NotFound:
                raise LookupError(f"no tube {name!r}") from None
            await client.use(name)
            for which, peek in (("ready", client.peek_ready), ("delayed", client.peek_delayed),
                                ("buried", client.peek_buried)):
                try:
                    peeks.append((which, await self._job(client, await peek())))
                except NotFound:
                    peeks.append((which, None))
        paused = int(stats["pause-time-left"])
        actions = [Action("kick", "Kick buried (else delayed) jobs", {"tube": name},
                          ask="count", ask_default=int(stats["current-jobs-buried"]) or 1),
                   Action("pause", "Pause for seconds (0 ends a pause)", {"tube": name},
                          ask="seconds", ask_default=0 if paused else 60)]
        return QueueView(
            name, [(k, str(v)) for k, v in stats.items() if k != "name"],
            [(title, int(stats[key])) for title, key in _TUBE_COUNTS], peeks=peeks,
            actions=actions,
            note="beanstalkd cannot list a tube's jobs: the next job of each state is shown.",
        )

    async def job(self, job_id: str) -> JobView | None:
        from beanstalk_client import NotFound

        if not job_id.isdigit():
            return None
        async with self.client() as client:
            try:
                found = await client.peek(int(job_id))
            except NotFound:
                return None
            return await self._job(client, found)

    async def failed(self, group: str | None, offset: int) -> FailedView:
        from beanstalk_client import NotFound

        groups, jobs = [], []
        async with self.client() as client:
            for tube in await client.list_tubes():
                stats = await self._tube_stats(client, tube)
                buried = int(stats["current-jobs-buried"]) if stats else 0
                if buried:
                    groups.append(FailedGroup(tube, buried, [
                        Action("kick", "Kick", {"tube": tube}, ask="count", ask_default=buried)]))
            if group is not None:
                await client.use(group)
                try:
                    found = await self._job(client, await client.peek_buried())
                except NotFound:
                    found = None
                jobs = [found] if found is not None else []
        return FailedView(groups, group, jobs, sum(g.count for g in groups if g.name == group),
                          note="Buried jobs by tube; beanstalkd shows only the next buried "
                               "job of a tube (kick or delete it to see the one after).")

    async def act(self, verb: str, params: Mapping[str, str]) -> str:
        async with self.client() as client:
            if verb == "kick":
                tube = _field(params, "tube")
                await client.use(tube)
                count = await client.kick(_number(params, "count", 1))
                return f"kicked {count} jobs in tube {tube}"
            if verb == "kick-job":
                job = _number(params, "job")
                await client.kick_job(job)
                return f"kicked job {job}"
            if verb == "delete":
                job = _number(params, "job")
                await client.delete(job)
                return f"deleted job {job}"
            if verb == "pause":
                tube, seconds = _field(params, "tube"), _number(params, "seconds")
                await client.pause_tube(tube, seconds)
                return f"paused tube {tube} for {seconds} s"
        return await super().act(verb, params)


# -- Gearman ----------------------------------------------------------------------------------


class GearmanSource(Source):
    system = "gearman"
    kind = "function"
    port = 4730
    has_jobs = False

    async def _open(self) -> Any:
        from gearman_client import AsyncAdmin

        admin = AsyncAdmin(self.url, timeout=TIMEOUT)
        await admin.__aenter__()
        return admin

    async def overview(self) -> Overview:
        columns = [Column("queued", "queued"), Column("running", "running"),
                   Column("workers", "workers"), Column("queued/s", "queued", rate=True)]
        async with self.client() as admin:
            status = await admin.status()
        return Overview(columns, {s.function: {"queued": s.queued, "running": s.running,
                                               "workers": s.workers} for s in status})

    async def queue(self, name: str, state: str | None, offset: int) -> QueueView:
        from gearman_client import ServerError

        async with self.client() as admin:
            status = {s.function: s for s in await admin.status()}
            workers = [w for w in await admin.workers() if name in w.functions]
            try:
                held = await admin.show_jobs()
            except ServerError:  # a server without 'show jobs'
                held = []
        if name not in status:
            raise LookupError(f"no function {name!r}")
        s = status[name]
        stats = [("queued (running included)", str(s.queued)), ("running", str(s.running)),
                 ("workers", str(s.workers))]
        stats += [(f"worker fd {w.fd}", f"{w.address} {w.client_id}") for w in workers]
        jobs = [JobRow(text(j.handle), "queued" if j.queued else "running",
                       f"retries {j.retries}", link=False,
                       actions=[Action("cancel", "Cancel", {"handle": text(j.handle)},
                                       confirm=f"Cancel job {text(j.handle)}?")])
                for j in held]
        return QueueView(name, stats, [("waiting", s.queued - s.running), ("running", s.running),
                                       ("workers", s.workers)], jobs=jobs,
                         note="Gearman lists job handles per server, not per function: "
                              "the jobs below are all the server holds.")

    async def act(self, verb: str, params: Mapping[str, str]) -> str:
        if verb == "cancel":
            handle = _field(params, "handle")
            async with self.client() as admin:
                await admin.cancel_job(handle)
            return f"cancelled job {handle}"
        return await super().act(verb, params)


# -- Workq ------------------------------------------------------------------------------------


class WorkqSource(Source):
    system = "workq"
    port = 9922

    async def _open(self) -> Any:
        from workq_client import AsyncClient

        client = AsyncClient(self.url, timeout=TIMEOUT)
        await client.connect()
        return client

    async def overview(self) -> Overview:
        columns = [Column("ready", "ready"), Column("scheduled", "scheduled"),
                   Column("ready/s", "ready", rate=True)]
        queues: list[Any] = []
        async with self.client() as client:
            while True:
                page = await client.inspect_queues(len(queues), 100)
                queues += page
                if len(page) < 100:
                    break
        return Overview(columns, {q.name: {"ready": q.ready_len, "scheduled": q.scheduled_len}
                                  for q in queues})

    @staticmethod
    def _state(job: Any) -> str:
        return str(getattr(job.state, "name", job.state)).lower()

    async def queue(self, name: str, state: str | None, offset: int) -> QueueView:
        state = state if state in ("ready", "scheduled") else "ready"
        from workq_client import NotFound

        async with self.client() as client:
            try:
                info = await client.inspect_queue(name)
            except NotFound:
                raise LookupError(f"no queue {name!r}") from None
            listing = client.inspect_jobs if state == "ready" else client.inspect_scheduled_jobs
            jobs = await listing(name, offset, PAGE + 1)
        rows = [JobRow(j.job_id, self._state(j), text(j.payload, SUMMARY)) for j in jobs[:PAGE]]
        return QueueView(name, [("ready", str(info.ready_len)),
                                ("scheduled", str(info.scheduled_len))],
                         [("ready", info.ready_len), ("scheduled", info.scheduled_len)],
                         states=["ready", "scheduled"], state=state, jobs=rows, offset=offset,
                         more=len(jobs) > PAGE)

    async def job(self, job_id: str) -> JobView | None:
        from workq_client import NotFound

        async with self.client() as client:
            try:
                job = await client.inspect_job(job_id)
            except (NotFound, ValueError):  # ValueError: not a job id
                return None
        fields = [("queue", job.name), ("priority", str(job.priority)),
                  ("attempts", f"{job.attempts} of {job.max_attempts or 'unlimited'}"),
                  ("fails", f"{job.fails} of {job.max_fails or 'unlimited'}"),
                  ("ttr", f"{job.ttr:g} s"), ("ttl", f"{job.ttl:g} s"),
                  ("created", when(job.created)), ("scheduled for", when(job.time))]
        fields += [(k, text(v)) for k, v in job.extra.items()]
        return JobView(job.job_id, self._state(job), fields, text(job.payload), actions=[
            Action("delete", "Delete", {"job": job.job_id}, confirm=f"Delete job {job.job_id}?")])

    async def act(self, verb: str, params: Mapping[str, str]) -> str:
        if verb == "delete":
            job = _field(params, "job")
            async with self.client() as client:
                await client.delete(job)
            return f"deleted job {job}"
        return await super().act(verb, params)


# -- qless ------------------------------------------------------------------------------------


def _bucket_labels() -> list[str]:
    """The labels of qless's 148 histogram buckets: seconds, minutes, hours, days."""
    return ([f"{i}s" for i in range(60)] + [f"{i}m" for i in range(1, 60)]
            + [f"{i}h" for i in range(1, 24)] + [f"{i}d" for i in range(1, 7)])


class QlessSource(Source):
    system = "qless"
    has_failed = True

    def check(self, url: str) -> None:
        from qless_client import parse_redis_address

        parse_redis_address(url)

    async def _open(self) -> Any:
        from qless_client import AsyncClient

        client: Any = AsyncClient(self.url, worker_name="jobwire-dashboard", timeout=TIMEOUT)
        await client.__aenter__()
        return client

    async def overview(self) -> Overview:
        names = ("waiting", "running", "stalled", "scheduled", "depends", "recurring")
        columns = [Column(n, n) for n in names]
        columns += [Column("failed today", "failed"), Column("popped/s", "popped", rate=True),
                    Column("completed/s", "completed", rate=True)]
        rows: dict[str, dict[str, int]] = {}
        paused = set()
        async with self.client() as client:
            for counts in await client.queues():
                stats = await client.queue(counts["name"]).stats()
                rows[counts["name"]] = {
                    **{n: counts[n] for n in names}, "failed": stats["failed"],
                    "popped": stats["wait"]["count"], "completed": stats["run"]["count"]}
                if counts["paused"]:
                    paused.add(counts["name"])
        return Overview(columns, rows, paused)

    def _actions(self, job: Any) -> list[Action]:
        actions = []
        if job.state == "failed" and job.queue:
            actions.append(Action("retry", f"Retry in {job.queue}", {"jid": job.jid}))
        if job.state != "complete":
            actions.append(Action("cancel", "Cancel", {"jid": job.jid},
                                  confirm=f"Cancel job {job.jid}?"))
        return actions

    def _view(self, job: Any) -> JobView:
        fields = [("class", job.klass), ("queue", job.queue or ""), ("worker", job.worker),
                  ("priority", str(job.priority)),
                  ("retries", f"{job.remaining} of {job.retries} left"),
                  ("tags", ", ".join(job.tags)), ("expires", when(job.expires)),
                  ("depends on", ", ".join(job.dependencies)),
                  ("dependents", ", ".join(job.dependents))]
        if job.failure:
            fields += [("failure", f"{job.failure['group']} at {when(job.failure['when'])} "
                                   f"by {job.failure['worker']}"),
                       ("message", job.failure["message"])]
        try:
            body = json.dumps(job.data, indent=2, ensure_ascii=False)
        except ValueError:  # data the serializer cannot read
            body = "(data that is not JSON)"
        history = [(when(e.get("when")), " ".join(
            str(part) for part in (e.get("what"), e.get("q") and f"in {e['q']}",
                                   e.get("worker") and f"by {e['worker']}", e.get("group"))
            if part)) for e in job.history]
        return JobView(job.jid, job.state, [(k, text(v)) for k, v in fields], text(body),
                       [(w, text(h)) for w, h in history], self._actions(job))

    async def queue(self, name: str, state: str | None, offset: int) -> QueueView:
        state = state if state in QLESS_STATES else "waiting"
        async with self.client() as client:
            queue = client.queue(name)
            counts = await queue.counts()
            stats = await queue.stats()
            if state == "waiting":  # qless lists no waiting jobs: peek (stalled ones first)
                peeked = await queue.peek(offset + PAGE + 1 + counts["stalled"])
                page = [j for j in peeked if j.state == "waiting"][offset:offset + PAGE + 1]
            else:
                page = await client.jobs.get(*await queue.jobs(state, offset, PAGE + 1))
        numbers = ("waiting", "running", "stalled", "scheduled", "depends", "recurring")
        rows = [JobRow(j.jid, j.state, f"{j.klass} {text(json.dumps(j.data), SUMMARY)}")
                for j in page[:PAGE]]
        summary = [("paused", "yes" if counts["paused"] else "no"),
                   ("failed today", str(stats["failed"])),
                   ("failures today", str(stats["failures"])),
                   ("retries today", str(stats["retries"]))]
        for kind in ("wait", "run"):
            s = stats[kind]
            summary.append((f"{kind} time today", f"{s['count']} jobs, mean {s['mean']:.3f} s, "
                                                  f"std {s['std']:.3f} s"))
        labels = _bucket_labels()
        histograms = [Histogram(f"{kind} time today", labels, list(stats[kind]["histogram"]))
                      for kind in ("wait", "run")]
        pause = ("unpause", "Unpause") if counts["paused"] else ("pause", "Pause")
        return QueueView(name, summary, [(n, counts[n]) for n in numbers], histograms,
                         list(QLESS_STATES), state, rows, offset, len(page) > PAGE,
                         actions=[Action(pause[0], pause[1], {"queue": name})])

    async def job(self, job_id: str) -> JobView | None:
        async with self.client() as client:
            job = await client.get(job_id)
        return None if job is None else self._view(job)

    async def failed(self, group: str | None, offset: int) -> FailedView:
        async with self.client() as client:
            counts = await client.failed()
            total, jobs = (await client.failed_jobs(group, offset, PAGE)
                           if group is not None else (0, []))
        groups = [FailedGroup(g, n, [Action("unfail", "Unfail", {"group": g},
                                            ask="count", ask_default=n)])
                  for g, n in sorted(counts.items())]
        return FailedView(groups, group, [self._view(j) for j in jobs], total, offset,
                          note="Failed jobs by failure group, as qless groups them. Unfail puts "
                               "the group's latest failures back into the queue each came "
                               "from.")

    async def act(self, verb: str, params: Mapping[str, str]) -> str:
        from qless_client import JobNotFound

        async with self.client() as client:
            if verb in ("pause", "unpause"):
                name = _field(params, "queue")
                await getattr(client.queue(name), verb)()
                return f"{verb}d queue {name}"
            if verb == "unfail":
                group, count = _field(params, "group"), _number(params, "count", 1)
                _, jobs = await client.failed_jobs(group, 0, count)
                moved = 0
                for job in jobs:  # each back into its own queue
                    if job.queue:
                        await job.move(job.queue)
                        moved += 1
                return f"put {moved} jobs of {group} back into their queues"
            if verb in ("retry", "cancel"):
                jid = _field(params, "jid")
                job = await client.get(jid)
                if job is None:
                    raise JobNotFound(f"no job {jid}")
                if verb == "cancel":
                    await job.cancel()
                    return f"cancelled job {jid}"
                if job.state != "failed" or not job.queue:
                    raise ActionError(f"job {jid} is {job.state}, not failed")
                await job.move(job.queue)
                return f"put job {jid} back into {job.queue}"
        return await super().act(verb, params)


SOURCES: dict[str, type[Source]] = {
    "beanstalk": BeanstalkSource, "gearman": GearmanSource, "workq": WorkqSource,
    "qless": QlessSource,
}


def source_for(url: str) -> Source:
    """The source for ``url``, its system named by the scheme: ``beanstalk://``
    (``beanstalkd://``, ``beanstalk+unix://``), ``gearman://``, ``workq://``
    (``workq+unix://``), ``redis://`` (``rediss://``, ``redis+unix://``: qless).

    Raises:
        InvalidAddress: no scheme, or one that names no system (the message has no password).
    """
    scheme = split_url(url).scheme.lower() if "://" in url else ""
    for system, schemes in _SCHEMES.items():
        if scheme in schemes:
            return SOURCES[system](url)
    raise InvalidAddress(
        f"{redact(url)!r}: start it with the system's scheme: beanstalk://, gearman://, "
        f"workq://, or redis:// (qless); a unix socket as beanstalk+unix:///path ...")
