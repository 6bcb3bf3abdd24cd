"""``jobwire worker [URL] TARGET``: run a handler, given by its import path, on a system's worker.

    jobwire worker beanstalk://127.0.0.1:11300 --tube emails app.tasks:send --concurrency 32

The system comes from the URL's scheme (``beanstalk://``, ``gearman://``, ``workq://``,
``redis://`` for qless) or from the option that names what to take jobs from (``--tube``,
``--function``, ``--name``, ``--queue``); without a URL, the system's environment variable
(``BEANSTALK_URL``, ``GEARMAN_SERVERS``, ``WORKQ_URL``, ``QLESS_URL``) or its local default.

The handler runs on the protocol's own worker (its public API only): an ``async def`` handler
(or an object whose ``__call__`` is one) on ``AsyncWorker``, any other callable on the threaded
``Worker``. The workers bring the graceful stop on SIGTERM/SIGINT, reconnects with back-off and
the job lifecycle events; this module adds, around them:

* a log line per job outcome on stdout (``--log-format text|json``), made from the worker's
  events (:class:`_JobLog`, given as its ``events=``);
* the rolling-restart limits (``--max-jobs``, ``--max-seconds``) and ``--burst`` (stop once the
  server holds nothing ready for this worker and the worker holds nothing), which call the
  worker's ``stop``: running jobs finish (up to ``--shutdown-timeout``) and the exit code is 0;
* a health line on SIGUSR1 (stderr) and ``--health-port`` (JSON over HTTP, standard library).

A thread of its own (:class:`_Supervisor`) keeps the clocks, asks the server how many jobs are
ready (one plain client of the system's, the *probe*, which also says whether the server
answers) and prints the health line.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, TextIO

import click

from jobwire._url import redact
from jobwire.cli._app import (
    USAGE,
    Failed,
    body_text,
    json_mode,
    shared_flags,
    tls_flags,
    tls_options,
)
from jobwire.errors import JobwireError
from jobwire.events import EVENT_KINDS, EventSink

log = logging.getLogger("jobwire.worker")

#: Seconds between two looks at the server under ``--burst``.
BURST_POLL = 0.25
#: The reply timeout of the probe's client.
PROBE_TIMEOUT = 5.0
#: Every outcome a job log line may name, in the order the health line shows them.
OUTCOMES = ("done", "failed", "retried", "buried", "handed_back", "lost")


# -- the systems ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _System:
    name: str
    env: str
    default: str
    option: str  # the option naming what to take jobs from
    schemes: frozenset[str]


SYSTEMS = {
    "beanstalk": _System("beanstalk", "BEANSTALK_URL", "beanstalk://127.0.0.1:11300", "--tube",
                         frozenset({"beanstalk", "beanstalkd", "beanstalk+unix",
                                    "beanstalkd+unix"})),
    "gearman": _System("gearman", "GEARMAN_SERVERS", "127.0.0.1:4730", "--function",
                       frozenset({"gearman"})),
    "workq": _System("workq", "WORKQ_URL", "workq://127.0.0.1:9922", "--name",
                     frozenset({"workq"})),
    "qless": _System("qless", "QLESS_URL", "redis://127.0.0.1:6379/0", "--queue",
                     frozenset({"redis", "rediss", "redis+unix"})),
}


def _scheme_system(url: str) -> str | None:
    """The system a URL's scheme names (the first server of a comma-separated list); ``None``
    for no scheme, or ``unix://`` (beanstalkd and Redis both listen there)."""
    first = url.split(",", 1)[0].strip()
    scheme, sep, _ = first.partition("://")
    if not sep:
        return None
    scheme = scheme.lower()
    for system in SYSTEMS.values():
        if scheme in system.schemes:
            return system.name
    if scheme == "unix":
        return None
    known = sorted(s for system in SYSTEMS.values() for s in system.schemes if "+" not in s)
    raise click.UsageError(f"{redact(first)!r}: unknown scheme {scheme!r} (one of "
                           f"{', '.join(s + '://' for s in known)})")


def _choose(url: str | None, names: dict[str, tuple[str, ...]]) -> tuple[_System, str]:
    """The system and the address, from the URL, the queue options given and the environment.

    Raises:
        click.UsageError: the options of two systems, a URL of another system than the
            options, or nothing that says which system (exit 2).
    """
    given = [name for name, values in names.items() if values]
    if len(given) > 1:
        options = " and ".join(SYSTEMS[name].option for name in given)
        raise click.UsageError(f"{options} belong to different systems: give one")
    by_option = given[0] if given else None
    if url is not None:
        by_scheme = _scheme_system(url)
        if by_scheme and by_option and by_scheme != by_option:
            raise click.UsageError(f"{redact(url)!r} is a {by_scheme} address, but "
                                   f"{SYSTEMS[by_option].option} is {by_option}'s")
        chosen = by_scheme or by_option
        if chosen is None:
            raise click.UsageError(
                f"{redact(url)!r}: say which system it is: a URL with its scheme "
                "(beanstalk://, gearman://, workq://, redis://) or --tube, --function, --name "
                "or --queue")
        return SYSTEMS[chosen], url
    if by_option is not None:
        system = SYSTEMS[by_option]
        return system, os.environ.get(system.env) or system.default
    set_ = [s for s in SYSTEMS.values() if os.environ.get(s.env)]
    if len(set_) == 1:
        return set_[0], os.environ[set_[0].env]
    raise click.UsageError(
        "which server? give a URL (beanstalk://host:11300, gearman://host:4730, "
        "workq://host:9922, redis://host:6379/0) or --tube, --function, --name or --queue "
        "with $BEANSTALK_URL, $GEARMAN_SERVERS, $WORKQ_URL or $QLESS_URL set")


# -- the handler ------------------------------------------------------------------------------


def load_target(target: str) -> tuple[Callable[..., Any], bool]:
    """Import ``module:attribute`` (or ``module.attribute``; the attribute may be dotted) with
    the current directory on ``sys.path``, as rq and celery do; the callable and whether it is
    async (an ``async def``, or an object whose ``__call__`` is one).

    Raises:
        Failed: (exit 2) not of that form, the import failed, no such attribute, or not
            callable.
    """
    if ":" in target:
        module_name, _, attribute = target.partition(":")
    else:
        module_name, _, attribute = target.rpartition(".")
    parts = [*module_name.split("."), *attribute.split(".")]
    if not module_name or not attribute or not all(p.isidentifier() for p in parts):
        raise Failed(f"{target!r}: TARGET is module:attribute or module.attribute "
                     "(e.g. app.tasks:send)", USAGE)
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        text = " ".join(str(exc).split())
        raise Failed(f"cannot import {module_name!r} (TARGET {target!r}): "
                     f"{type(exc).__name__}: {text}", USAGE) from exc
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise Failed(f"{target!r}: module {module_name!r} has no attribute "
                         f"{attribute!r}", USAGE) from None
    if not callable(obj):
        raise Failed(f"{target!r} is a {type(obj).__name__}, not a callable", USAGE)
    is_async = (inspect.iscoroutinefunction(obj)
                or inspect.iscoroutinefunction(type(obj).__call__))
    return obj, is_async


def _job_key(system: str) -> Callable[[Any], str]:
    """How the events name a handler's job: beanstalk's id, Gearman's handle, Workq's job id,
    qless's jid."""
    if system == "beanstalk":
        return lambda job: str(job.id)
    if system == "gearman":
        return lambda job: bytes(job.handle).decode("utf-8", "replace")
    if system == "workq":
        return lambda job: str(job.job_id)
    return lambda job: str(job.jid)


@dataclass
class _Run:
    """One handler run: when it started, and whether it raised."""

    started: float  # time.monotonic()
    raised: bool = False


class _Tracker:
    """Wraps the handler: counts the jobs started (``--max-jobs``) and remembers, per job,
    whether its handler raised, which tells a qless ``retry`` by policy from a hand-back."""

    #: Runs remembered at most (a job whose outcome never comes is forgotten in time).
    LIMIT = 100_000

    def __init__(self, key: Callable[[Any], str], max_jobs: int | None,
                 stop: Callable[[str], None], handler_timeout: float | None) -> None:
        self.key = key
        self.max_jobs = max_jobs
        self.stop = stop
        self.handler_timeout = handler_timeout
        self.started = 0
        self.runs: dict[str, _Run] = {}
        self.lock = threading.Lock()

    def begin(self, job: Any) -> _Run:
        run = _Run(time.monotonic())
        with self.lock:
            self.started += 1
            started = self.started
            self.runs[self.key(job)] = run
            if len(self.runs) > self.LIMIT:
                del self.runs[next(iter(self.runs))]
        if self.max_jobs is not None and started == self.max_jobs:
            self.stop(f"--max-jobs {self.max_jobs}: {started} jobs started")
        return run

    def failed(self, job_id: str) -> bool:
        """Whether ``job_id``'s handler ran and failed: it raised, or it ran past
        ``handler_timeout`` (the worker then fails it with ``TimeoutError``); forgets it."""
        with self.lock:
            run = self.runs.pop(job_id, None)
        if run is None:
            return False
        timeout = self.handler_timeout
        return run.raised or (timeout is not None and time.monotonic() - run.started >= timeout)

    def forget(self, job_id: str) -> None:
        with self.lock:
            self.runs.pop(job_id, None)

    def wrap_sync(self, handler: Callable[[Any], object]) -> Callable[[Any], object]:
        def handle(job: Any) -> object:
            run = self.begin(job)
            try:
                result = handler(job)
            except Exception:
                run.raised = True
                raise
            if inspect.isawaitable(result):
                run.raised = True
                if inspect.iscoroutine(result):
                    result.close()
                raise TypeError("the handler returned an awaitable: make it an async def "
                                "(jobwire worker runs those on the async worker)")
            return result

        return handle

    def wrap_async(self, handler: Callable[[Any], Awaitable[object]]
                   ) -> Callable[[Any], Awaitable[object]]:
        async def handle(job: Any) -> object:
            run = self.begin(job)
            try:
                return await handler(job)
            except Exception:
                run.raised = True
                raise

        return handle


# -- the job log --------------------------------------------------------------------------------


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


class _JobLog(EventSink):
    """The worker's ``events=``: one line per job outcome on ``out`` instead of files.

    Outcomes: ``done`` (completed), ``failed`` (the handler raised and the job was failed for
    good), ``retried`` (failed and put back to run again: beanstalk's release after a failure,
    qless's ``retry``), ``buried`` (beanstalk), ``handed_back`` (put back without its handler
    finishing, at shutdown: beanstalk's release, Gearman's requeue, qless's ``retry``) and
    ``lost`` (the worker could not report it; the server gives it out again after its TTR or
    lock). The duration is from the job's ``reserved`` event to its outcome.

    It takes every call of the :class:`EventSink` interface; nothing is written to files.
    """

    def __init__(self, system: str, fmt: str, tracker: _Tracker, out: TextIO) -> None:
        # No files and no writer thread: EventSink's own __init__ is not run.
        self.system = system
        self.fmt = fmt
        self.tracker = tracker
        self.out = out
        self.dropped = 0
        self.written = 0
        self.error: Exception | None = None
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self._reserved: dict[str, float] = {}
        self._failures: dict[str, tuple[str | None, int | None]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"<jobwire worker job log {self.fmt}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def flush(self) -> None:
        with self._lock:
            self.out.flush()

    def close(self) -> None:
        self._closed = True
        self.flush()

    def emit(
        self, event: str, time: float, system: str, queue: str, job: str, worker: str,
        put_time: float | None = None, group: str | None = None, attempt: int | None = None,
    ) -> None:
        """Turn one event into an outcome line (or remember it until the outcome).

        Raises:
            ValueError: ``event`` is not one of :data:`jobwire.events.EVENT_KINDS`.
        """
        if event not in EVENT_KINDS:
            raise ValueError(f"unknown event {event!r}; one of {sorted(EVENT_KINDS)}")
        with self._lock:
            if event == "reserved":
                self._reserved[job] = time
                if len(self._reserved) > _Tracker.LIMIT:
                    del self._reserved[next(iter(self._reserved))]
                return
            outcome = self._outcome(event, system, job)
            if outcome is None:
                self._failures[job] = (group, attempt)
                return
            if job in self._failures:
                group, attempt = self._failures.pop(job)
            reserved = self._reserved.pop(job, None)
            self.tracker.forget(job)
            self.counts[outcome] += 1
            self.written += 1
            duration = None if reserved is None else round(max(time - reserved, 0.0), 6)
            self._write(time, system, queue, job, outcome, duration, group, attempt, worker)

    def _outcome(self, event: str, system: str, job: str) -> str | None:
        """The outcome an event stands for; ``None``: a beanstalk failure, whose release or
        bury (or loss) that follows says what became of the job."""
        if event == "completed":
            return "done"
        if event == "failed":
            return None if system == "beanstalk" else "failed"
        if system == "beanstalk" and job in self._failures:
            return {"released": "retried", "buried": "buried"}.get(event, event)
        if event == "released":
            return "handed_back"
        if event == "retried":  # qless: by policy after a failure, or a hand-back
            return "retried" if self.tracker.failed(job) else "handed_back"
        return event  # buried, lost

    def _write(self, when: float, system: str, queue: str, job: str, outcome: str,
               duration: float | None, group: str | None, attempt: int | None,
               worker: str) -> None:
        if self.fmt == "json":
            line = json.dumps({
                "time": _iso(when), "system": system, "queue": queue, "job": job,
                "outcome": outcome, "duration": duration, "attempt": attempt, "group": group,
                "worker": worker,
            }, ensure_ascii=False)
        else:
            shown = "-" if duration is None else f"{duration:.3f}s"
            line = " ".join([_iso(when), system, _safe(queue), _safe(job), outcome, shown])
            if group is not None:
                line += f" group={_safe(group)}"
            if attempt is not None:
                line += f" attempt={attempt}"
        self.out.write(line + "\n")
        self.out.flush()


def _safe(text: str) -> str:
    """A name from a server for a text line: control characters escaped, no spaces."""
    return body_text(text.encode("utf-8", "surrogatepass")).replace(" ", "\\x20") or "''"


class _LogFormatter(logging.Formatter):
    """The library's log records (a handler's traceback, a reconnect) on stderr: text, or one
    JSON object per record under ``--log-format json``."""

    def __init__(self, fmt: str) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        if not self.json:
            return super().format(record)
        data: dict[str, Any] = {
            "time": _iso(record.created), "level": record.levelname.lower(),
            "logger": record.name, "message": record.getMessage(),
        }
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


# -- the server probe -------------------------------------------------------------------------


class _Probe:
    """A plain client of the system (in one thread at a time: a lock), asked how many jobs wait
    for this worker; reconnects on the next ask after a failure."""

    def __init__(self, open_: Callable[[], Any], count: Callable[[Any], int]) -> None:
        self._open = open_
        self._count = count
        self._client: Any = None
        self._lock = threading.Lock()
        #: Whether the server answered the last ask.
        self.connected = False

    def ready(self, *, raising: bool = False) -> int | None:
        """Jobs ready for this worker on the server; ``None`` when it did not answer.

        Raises:
            JobwireError, OSError: with ``raising``, what the client raised.
        """
        with self._lock:
            try:
                if self._client is None:
                    self._client = self._open()
                count = self._count(self._client)
            except (JobwireError, OSError) as exc:
                self._drop()
                self.connected = False
                if raising:
                    raise
                log.debug("the server did not answer: %r", exc)
                return None
            self.connected = True
            return count

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # already broken
                client.close()

    def close(self) -> None:
        with self._lock:
            self._drop()


def _probe(system: str, url: str, names: Sequence[str], tls: dict[str, Any]) -> _Probe:
    """What "ready" means per system: beanstalkd's ``current-jobs-ready`` of the tubes, Gearman's
    ``status`` (queued less running, over every server that answers), Workq's ``inspect queue``
    ready length, qless's waiting and stalled counts. A tube, function or queue the server
    does not know holds nothing."""
    if system == "beanstalk":
        from beanstalk_client import Client as BeanstalkClient
        from beanstalk_client import NotFound as BeanstalkNotFound

        def tube_ready(client: BeanstalkClient, tube: str) -> int:
            try:
                return int(client.stats_tube(tube)["current-jobs-ready"])
            except BeanstalkNotFound:
                return 0

        return _Probe(lambda: BeanstalkClient(url, timeout=PROBE_TIMEOUT, **tls),
                      lambda c: sum(tube_ready(c, tube) for tube in names))
    if system == "gearman":
        from gearman_client import Admin
        from jobwire._url import resolve_addresses

        addresses = resolve_addresses(url, scheme="gearman", default_port=4730)
        wanted = set(names)

        def admins() -> list[Admin]:
            opened, first = [], None
            for address in addresses:
                admin = Admin(address, timeout=PROBE_TIMEOUT, **tls)
                try:
                    admin.status()
                except (JobwireError, OSError) as exc:
                    admin.close()
                    first = first or exc
                    continue
                opened.append(admin)
            if not opened and first is not None:
                raise first
            return opened

        def queued(each: list[Admin]) -> int:
            return sum(max(row.queued - row.running, 0) for admin in each
                       for row in admin.status() if row.function in wanted)

        class _Admins(list[Admin]):
            def close(self) -> None:
                for admin in self:
                    admin.close()

        return _Probe(lambda: _Admins(admins()), queued)
    if system == "workq":
        from workq_client import Client as WorkqClient
        from workq_client import NotFound as WorkqNotFound

        def name_ready(client: WorkqClient, name: str) -> int:
            try:
                return client.inspect_queue(name).ready_len
            except WorkqNotFound:
                return 0

        return _Probe(lambda: WorkqClient(url, timeout=PROBE_TIMEOUT, **tls),
                      lambda c: sum(name_ready(c, name) for name in names))
    from qless_client import Client as QlessClient

    def queue_ready(client: QlessClient, queue: str) -> int:
        counts = client.queue(queue).counts()
        return int(counts["waiting"]) + int(counts["stalled"])

    return _Probe(lambda: QlessClient(url, timeout=PROBE_TIMEOUT, **tls),
                  lambda c: sum(queue_ready(c, queue) for queue in names))


# -- the workers --------------------------------------------------------------------------------


@dataclass
class _Options:
    system: str
    url: str
    names: list[str]
    concurrency: int
    handler_timeout: float | None
    shutdown_timeout: float
    max_attempts: int | None
    retry_delay: float | None
    tls: dict[str, Any] = field(default_factory=dict)


class _Driver:
    """Runs one worker, sync or async, and stops it from any thread."""

    def __init__(self, worker: Any, run: Callable[[Any], Any], is_async: bool) -> None:
        self.worker = worker
        self._run = run
        self.is_async = is_async
        self._token: Any = None
        self._loop_thread: int | None = None

    def in_flight(self) -> int:
        return int(self.worker.stats.in_flight)

    def run(self, handler: Callable[[Any], Any], started: Callable[[], None]) -> None:
        """Block until the worker stops; ``started()`` once it is about to take jobs."""
        if not self.is_async:
            started()
            self._run(handler)
            return
        import anyio
        import anyio.lowlevel

        async def main() -> None:
            self._token = anyio.lowlevel.current_token()
            self._loop_thread = threading.get_ident()
            started()
            try:
                await self._run(handler)
            finally:
                self._token = None

        anyio.run(main)

    def stop(self) -> None:
        """Ask the worker to stop (any thread)."""
        if not self.is_async:
            self.worker.stop()
            return
        token = self._token
        if token is None or threading.get_ident() == self._loop_thread:
            self.worker.stop()
            return
        import anyio.from_thread

        with contextlib.suppress(RuntimeError):  # the loop has just ended
            anyio.from_thread.run_sync(self.worker.stop, token=token)


def _retry(o: _Options, whole_seconds: bool) -> Any:
    """The retry policy of ``--max-attempts``/``--retry-delay`` (None: the worker's default)."""
    if o.max_attempts is None and o.retry_delay is None:
        return None
    delay = 1.0 if o.retry_delay is None else o.retry_delay
    if whole_seconds:
        from beanstalk_client import RetryPolicy as BeanstalkRetry

        if delay != int(delay):
            raise click.BadParameter(f"{delay:g}: beanstalkd delays are whole seconds",
                                     param_hint="--retry-delay")
        return BeanstalkRetry(base_delay=int(delay), max_delay=max(60, int(delay)),
                              max_attempts=5 if o.max_attempts is None else o.max_attempts)
    from jobwire import RetryPolicy

    return RetryPolicy(base_delay=delay, max_delay=max(60.0, delay),
                       max_attempts=o.max_attempts)


def _build(o: _Options, is_async: bool, events: EventSink) -> _Driver:
    """The system's ``AsyncWorker`` (async handler) or ``Worker`` (any other), from the options.

    Raises:
        click.UsageError: an option the system has no use for (exit 2); the worker's own
            errors for a bad address or value (exit 2).
    """
    unsupported = []
    if o.system in ("gearman", "workq"):
        if o.handler_timeout is not None:
            unsupported.append("--handler-timeout")
        if o.max_attempts is not None or o.retry_delay is not None:
            unsupported.append("--max-attempts/--retry-delay")
    if unsupported:
        why = ("Gearman cannot retry or time out a job from the worker" if o.system == "gearman"
               else "Workq retries by the job's own max-attempts and TTR")
        raise click.UsageError(f"{' and '.join(unsupported)}: not for {o.system} ({why})")
    common: dict[str, Any] = {"concurrency": o.concurrency,
                              "shutdown_timeout": o.shutdown_timeout, "events": events, **o.tls}
    if o.system == "beanstalk":
        import beanstalk_client as bc

        options = {**common, "tubes": o.names or ["default"],
                   "handler_timeout": o.handler_timeout}
        policy = _retry(o, whole_seconds=True)
        if policy is not None:
            options["retry"] = policy
        if is_async:
            aw = bc.AsyncWorker(o.url, **options)
            return _Driver(aw, lambda h: aw.run(h), True)
        w = bc.Worker(o.url, **options)
        return _Driver(w, lambda h: w.run(h), False)
    if o.system == "gearman":
        import gearman_client as gc

        if not o.names:
            raise click.UsageError("a Gearman worker needs --function NAME")
        if is_async:
            ag = gc.AsyncWorker(o.url, **common)

            def run_async_gearman(h: Any) -> Awaitable[None]:
                for function in o.names:
                    ag.register(function, h)
                return ag.run()

            return _Driver(ag, run_async_gearman, True)
        g = gc.Worker(o.url, **common)

        def run_gearman(h: Any) -> None:
            for function in o.names:
                g.register(function, h)
            g.run()

        return _Driver(g, run_gearman, False)
    if o.system == "workq":
        import workq_client as wc

        if not o.names:
            raise click.UsageError("a Workq worker needs --name NAME")
        # Leases wait 1 s at most, so that a stop (or --burst) ends within about a second.
        if is_async:
            aq = wc.AsyncWorker(o.url, o.names, wait=1.0, **common)
            return _Driver(aq, lambda h: aq.run(h), True)
        q = wc.Worker(o.url, o.names, wait=1.0, **common)
        return _Driver(q, lambda h: q.run(h), False)
    import qless_client as qc

    if not o.names:
        raise click.UsageError("a qless worker needs --queue NAME")
    options = {**common, "queues": o.names, "handler_timeout": o.handler_timeout}
    policy = _retry(o, whole_seconds=False)
    if policy is not None:
        options["retry"] = policy
    if is_async:
        al = qc.AsyncWorker(o.url, **options)
        return _Driver(al, lambda h: al.run(h), True)
    lw = qc.Worker(o.url, **options)
    return _Driver(lw, lambda h: lw.run(h), False)


# -- health and the supervisor ----------------------------------------------------------------


class _Supervisor:
    """The thread beside the worker: ``--max-seconds``, ``--burst``, and the health line on
    SIGUSR1 (the signal handler only writes a byte to a pipe this thread reads)."""

    def __init__(self, health: Callable[[], dict[str, Any]], probe: _Probe, driver: _Driver,
                 tracker: _Tracker, control: _Control, *, burst: bool,
                 max_seconds: float | None, fmt: str) -> None:
        self.health = health
        self.probe = probe
        self.driver = driver
        self.tracker = tracker
        self.control = control
        self.burst = burst
        self.max_seconds = max_seconds
        self.fmt = fmt
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._thread = threading.Thread(target=self._loop, name="jobwire-worker-supervisor",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self, what: bytes) -> None:
        """Wake the thread (safe in a signal handler: one write, no lock)."""
        with contextlib.suppress(OSError):  # the pipe is full (it wakes anyway) or closed
            os.write(self._write, what)

    def close(self) -> None:
        if self._thread.is_alive():
            self.poke(b"q")
            self._thread.join()
        os.close(self._read)
        os.close(self._write)

    def _loop(self) -> None:
        began = time.monotonic()
        was_idle, last_started = False, -1
        while True:
            now = time.monotonic()
            stopping = self.control.reason is not None
            waits = []
            if self.max_seconds is not None and not stopping:
                waits.append(max(began + self.max_seconds - now, 0.0))
            if self.burst and not stopping:
                waits.append(BURST_POLL)
            readable, _, _ = select.select([self._read], [], [], min(waits) if waits else None)
            if readable:
                data = os.read(self._read, 64)
                if b"h" in data:
                    self._print_health()
                if b"q" in data:
                    return
            if self.control.reason is not None:
                continue
            if self.max_seconds is not None and time.monotonic() - began >= self.max_seconds:
                self.control.stop(f"--max-seconds {self.max_seconds:g}")
            elif self.burst:
                started = self.tracker.started
                idle = self.probe.ready() == 0 and self.driver.in_flight() == 0
                if idle and was_idle and started == last_started:
                    self.control.stop("--burst: nothing ready and nothing in flight")
                was_idle, last_started = idle, started

    def _print_health(self) -> None:
        data = self.health()
        if self.fmt == "json":
            line = json.dumps(data, ensure_ascii=False)
        else:
            counts = ", ".join(f"{name.replace('_', ' ')} {data[name]}" for name in OUTCOMES)
            queued = "?" if data["ready"] is None else data["ready"]
            line = (f"jobwire worker: health: up {data['uptime']:.1f} s, "
                    f"{'connected' if data['connected'] else 'NOT connected'}, "
                    f"{'stopping, ' if data['stopping'] else ''}"
                    f"in flight {data['in_flight']}, {counts}, ready on the server {queued}")
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _health_server(host: str, port: int, health: Callable[[], dict[str, Any]]
                   ) -> ThreadingHTTPServer:
    """``GET /`` (or ``/health``): the health as JSON; 200 while the server answers, else 503.

    Raises:
        Failed: (exit 2) cannot listen on ``host:port``.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] not in ("/", "/health", "/healthz"):
                self.send_error(404)
                return
            data = health()
            body = (json.dumps(data, ensure_ascii=False) + "\n").encode()
            self.send_response(200 if data["connected"] else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # no access log on stderr

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise Failed(f"--health-port: cannot listen on {host}:{port}: {exc}", USAGE) from exc
    server.daemon_threads = True
    return server


# -- the command ----------------------------------------------------------------------------------


def _names(option: str, what: str) -> Callable[[Any], Any]:
    return click.option(option, "names_" + option[2:], multiple=True, metavar="NAME",
                        help=what)


@click.command(name="worker", context_settings={"show_default": True})
@click.argument("args", nargs=-1, metavar="[URL] TARGET")
@click.option("--url", help="The server (instead of the URL argument).")
@_names("--tube", "beanstalkd: a tube to watch (repeat for more; default: default).")
@_names("--function", "Gearman: a function to run (repeat for more).")
@_names("--name", "Workq: a job name to lease (repeat for more).")
@_names("--queue", "qless: a queue to pop, in order (repeat for more).")
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=1,
              help="Jobs handled at once (threads for a sync handler).")
@click.option("--handler-timeout", type=click.FloatRange(min=0, min_open=True),
              metavar="SECONDS", help="beanstalkd, qless: a handler running longer fails.")
@click.option("--shutdown-timeout", type=click.FloatRange(min=0), default=30.0,
              metavar="SECONDS", help="On stop, how long running jobs may finish before they "
              "are handed back.")
@click.option("--max-attempts", type=click.IntRange(min=1), metavar="N",
              help="beanstalkd, qless: tries before a failing job is buried (beanstalkd: 5 "
              "by default) or failed (qless: at once, unless this or --retry-delay is given; "
              "then within the job's own retries).")
@click.option("--retry-delay", type=click.FloatRange(min=0), metavar="SECONDS",
              help="beanstalkd, qless: the first retry's delay, doubling up to 60 s "
              "(beanstalkd: whole seconds) [default: 1].")
@click.option("--max-jobs", type=click.IntRange(min=1), metavar="N",
              help="Stop (exit 0) once N jobs have started; running ones finish.")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Stop (exit 0) after this long; running jobs finish.")
@click.option("--burst", is_flag=True,
              help="Stop (exit 0) once nothing is ready on the server and nothing runs.")
@click.option("--log-format", type=click.Choice(["text", "json"]),
              help="Job outcome lines on stdout, logs on stderr [default: text; json with "
              "--json].")
@click.option("--health-port", type=click.IntRange(0, 65535), metavar="PORT",
              help="Serve the health as JSON on http://HOST:PORT/ (0: any free port).")
@click.option("--health-host", default="127.0.0.1", metavar="HOST",
              help="The address --health-port listens on.")
@tls_flags
@shared_flags
def command(
    args: tuple[str, ...], url: str | None, names_tube: tuple[str, ...],
    names_function: tuple[str, ...], names_name: tuple[str, ...],
    names_queue: tuple[str, ...], concurrency: int, handler_timeout: float | None,
    shutdown_timeout: float, max_attempts: int | None, retry_delay: float | None,
    max_jobs: int | None, max_seconds: float | None, burst: bool, log_format: str | None,
    health_port: int | None, health_host: str,
) -> int:
    """Run TARGET (module:attribute, imported with the current directory on sys.path) on
    jobs from URL, until SIGTERM/SIGINT (graceful: running jobs finish), --max-jobs,
    --max-seconds or --burst.

    \b
      jobwire worker beanstalk://127.0.0.1:11300 --tube emails app.tasks:send -c 32
      jobwire worker gearman://127.0.0.1:4730 --function resize app.tasks:resize
      jobwire worker workq://127.0.0.1:9922 --name thumbnail app.tasks:thumbnail
      jobwire worker redis://127.0.0.1:6379/0 --queue emails app.tasks:send --burst

    An async def handler runs on the system's AsyncWorker, any other callable in threads on
    its Worker. A line per job outcome goes to stdout; SIGUSR1 prints a health line on
    stderr. Exit: 0 stopped, 2 usage (a bad TARGET too), 3 cannot connect at start.
    """
    if len(args) == 2 and url is not None:
        raise click.UsageError("give the server once: the URL argument or --url")
    if len(args) == 2:
        url, target = args
    elif len(args) == 1:
        target = args[0]
    else:
        raise click.UsageError("expected [URL] TARGET (e.g. beanstalk://127.0.0.1:11300 "
                               "app.tasks:send)")
    names = {"beanstalk": names_tube, "gearman": names_function, "workq": names_name,
             "qless": names_queue}
    system, address = _choose(url, names)
    fmt = log_format or ("json" if json_mode() else "text")
    handler, is_async = load_target(target)

    options = _Options(system.name, address, list(names[system.name]), concurrency,
                       handler_timeout, shutdown_timeout, max_attempts, retry_delay,
                       tls_options())
    queues = options.names or ["default"]
    control = _Control()
    tracker = _Tracker(_job_key(system.name), max_jobs, control.stop, handler_timeout)
    job_log = _JobLog(system.name, fmt, tracker, sys.stdout)
    driver = control.driver = _build(options, is_async, job_log)
    probe = _probe(system.name, address, queues, options.tls)
    began = time.monotonic()

    def health() -> dict[str, Any]:
        ready = probe.ready()
        data: dict[str, Any] = {
            "system": system.name, "url": redact(address), "queues": queues,
            "handler": target, "pid": os.getpid(), "uptime": round(time.monotonic() - began, 3),
            "connected": probe.connected, "stopping": control.reason is not None,
            "ready": ready, "in_flight": driver.in_flight(), "started": tracker.started,
        }
        data.update(job_log.counts)
        return data

    http = None if health_port is None else _health_server(health_host, health_port, health)
    ran = serving = False
    restore_logging = _configure_logging(fmt)
    try:
        probe.ready(raising=True)  # cannot connect at start: exit 3
        supervisor = _Supervisor(health, probe, driver, tracker, control, burst=burst,
                                 max_seconds=max_seconds, fmt=fmt)
        previous = _on_sigusr1(lambda: supervisor.poke(b"h"))
        try:
            if http is not None:
                threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.2},
                                 name="jobwire-worker-health", daemon=True).start()
                serving = True
                bound_host, bound_port = http.server_address[:2]
                log.info("health on http://%s:%d/", bound_host, bound_port)
            log.info("running %s (%s) on %s", target,
                     "async" if is_async else "sync, in threads", redact(repr(driver.worker)))
            wrapped = tracker.wrap_async(handler) if is_async else tracker.wrap_sync(handler)
            driver.run(wrapped, supervisor.start)
            ran = True
        finally:
            _restore_sigusr1(previous)
            supervisor.close()
            if http is not None and serving:
                http.shutdown()
    finally:
        if http is not None:
            http.server_close()
        probe.close()
        job_log.close()
        if ran:
            counts = ", ".join(f"{name.replace('_', ' ')} {n}"
                               for name, n in job_log.counts.items())
            log.info("stopped%s: %d started, %s",
                     f" ({control.reason})" if control.reason else "", tracker.started, counts)
        restore_logging()
    return 0


class _Control:
    """Stops the worker for a reason of this command's (``--max-jobs``, ``--max-seconds``,
    ``--burst``), from any thread; the first reason is kept."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.driver: _Driver | None = None
        self._lock = threading.Lock()

    def stop(self, reason: str) -> None:
        with self._lock:
            first = self.reason is None
            if first:
                self.reason = reason
        if first:
            log.info("stopping: %s", reason)
        if self.driver is not None:
            self.driver.stop()


def _configure_logging(fmt: str) -> Callable[[], None]:
    """The root logger to stderr (INFO; DEBUG under --debug), text or JSON; returns what puts
    the previous handlers and level back."""
    from jobwire.cli._app import _state

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogFormatter(fmt))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if _state["debug"] else logging.INFO)

    def restore() -> None:
        root.handlers[:] = handlers
        root.setLevel(level)

    return restore


_SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def _on_sigusr1(call: Callable[[], None]) -> _SignalHandler:
    """Call ``call()`` on SIGUSR1 (it must take no lock); what was installed before."""
    if not hasattr(signal, "SIGUSR1") or threading.current_thread() is not \
            threading.main_thread():
        return None

    def handler(signum: int, frame: FrameType | None) -> None:
        call()

    return signal.signal(signal.SIGUSR1, handler)


def _restore_sigusr1(previous: _SignalHandler) -> None:
    if previous is not None and hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, previous)


#: What ``_app._register`` adds to the root group.
group = command

__all__ = ["OUTCOMES", "command", "group", "load_target"]
