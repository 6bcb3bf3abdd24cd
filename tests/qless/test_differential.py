"""Our qless script against qless-core's, step by step (tests/qless/differential.py).

Each scenario below is a list of script calls; every call runs on qless-core's script (the one
qless-py 0.11.4 ships, fixed for Redis 7 in memory) and on ours, each in its own database, and
after every call the replies, the whole databases and the ``ql:*`` messages must be equal. After
the last step an epilogue reads everything back the way bindings do (``get`` of every job,
``recur.get`` of every template, ``queues``, ``workers``, ``failed``, ``track``, ``config.get``,
``stats`` and ``length`` of every queue), compared the same way.

Adding a case is adding one ``Scenario`` to SCENARIOS. A step that differs on purpose carries
``differs="<reason>"`` (and ends its scenario); the suite fails if it stops differing.

Time: T is 2023-11-14 22:13:20 UTC; its stats day starts at T - 80000, the next at T + 6400.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.qless.conftest import RedisServer
from tests.qless.differential import (
    Error,
    Outcome,
    Pair,
    Scenario,
    Step,
    call,
    compare,
    error_message,
    plain,
    play,
    their_source,
)

pytest.importorskip("qless", reason="qless-py (the qless-core script's carrier) is not installed")

T = 1_700_000_000
DAY = 86400
NEXT_DAY = T + 6400


# ------------------------------------------------------------------------------------------
# Step builders (the argument order of qless-core's api.lua)
# ------------------------------------------------------------------------------------------


def _options(options: dict[str, Any]) -> list[Any]:
    return [x for k, v in options.items() for x in (k, v)]


def put(jid: str, t: float = T, q: str = "q", delay: float = 0, klass: str = "K",
        data: Any = "{}", differs: str | None = None, **options: Any) -> Step:
    return call("put", t, q, jid, klass, data, delay, *_options(options), differs=differs)


def pop(t: float = T, q: str = "q", worker: str = "w1", count: Any = 1,
        differs: str | None = None) -> Step:
    return call("pop", t, q, worker, count, differs=differs)


def peek(t: float = T, q: str = "q", count: Any = 10) -> Step:
    return call("peek", t, q, count)


def get(jid: str, t: float = T, differs: str | None = None) -> Step:
    return call("get", t, jid, differs=differs)


def complete(jid: str, t: float = T, worker: str = "w1", q: str = "q", data: Any = "{}",
             differs: str | None = None, **options: Any) -> Step:
    return call("complete", t, jid, worker, q, data, *_options(options), differs=differs)


def fail(jid: str, t: float = T, worker: str = "w1", group: str = "g", message: str = "m",
         *data: Any, differs: str | None = None) -> Step:
    return call("fail", t, jid, worker, group, message, *data, differs=differs)


def retry(jid: str, t: float = T, q: str = "q", worker: str = "w1", *more: Any,
          differs: str | None = None) -> Step:
    return call("retry", t, jid, q, worker, *more, differs=differs)


def heartbeat(jid: str, t: float = T, worker: str = "w1", *data: Any,
              differs: str | None = None) -> Step:
    return call("heartbeat", t, jid, worker, *data, differs=differs)


def config(key: str, value: Any, t: float = T) -> Step:
    return call("config.set", t, key, value)


def recur(jid: str, t: float = T, q: str = "q", interval: Any = 60, offset: Any = 0,
          klass: str = "K", data: Any = "{}", spec: str = "interval", differs: str | None = None,
          **options: Any) -> Step:
    return call("recur", t, q, jid, klass, data, spec, interval, offset, *_options(options),
                differs=differs)


def scenario(name: str, *steps: Step) -> Scenario:
    return Scenario(name, steps)


# ------------------------------------------------------------------------------------------
# Scenarios
# ------------------------------------------------------------------------------------------

#: The reason of the intended differences in error texts (docs/qless.md).
CLEARER = ("clearer text where qless-core's is a table address, a nil or a misleading Queue() "
           "error; no binding matches on it")
NOT_FINITE = "inf and nan are refused as numbers; qless-core stores them (and scores with them)"

SCENARIOS = [
    # put / get -----------------------------------------------------------------------------
    scenario("put.plain", put("j1"), get("j1"), get("nope"),
             call("multiget", T, "j1", "nope"), call("length", T, "q")),
    scenario("put.options", put("j1", data='{"x": [1, 2]}', priority=-2, tags=["a", "b", "a"],
                                retries=3), get("j1")),
    scenario("put.fractional-now", put("j1", t=T + 0.123), put("j2", t=T + 0.5, priority=1.5),
             peek(T + 1), pop(T + 1.25, count=2)),
    scenario("put.delay", put("j1", delay=10), peek(T + 9), pop(T + 9),
             call("jobs", T + 9, "scheduled", "q"), call("queues", T + 9, "q"),
             pop(T + 10), get("j1", T + 10)),
    scenario("put.depends", put("a"), put("b", depends=["a"]),
             put("c", depends=["a", "nope", "b"]), get("b"), get("a"),
             call("jobs", T, "depends", "q"), pop(T + 1), complete("a", T + 2),
             get("b", T + 2), peek(T + 2), pop(T + 3, count=5), complete("b", T + 4),
             get("c", T + 4)),
    scenario("put.depends-on-complete-job", put("a"), pop(), complete("a", T + 1),
             put("b", T + 2, depends=["a"]), get("b", T + 2)),
    scenario("put.delay-and-depends", put("a"), put("b", delay=5, depends=["a"]), get("b")),
    scenario("put.delay-and-no-depends", put("b", delay=5, depends=[]), get("b")),
    scenario("put.re-put-changes-depends", put("a"), put("x"), put("b", depends=["a"]),
             put("b", T + 1, depends=["x"]), get("a", T + 1), get("b", T + 1),
             put("b", T + 2), get("b", T + 2)),
    scenario("put.moves-a-running-job", put("j1", priority=4, tags=["a"], retries=2), pop(),
             put("j1", T + 1, q="other", tags=["b"]), get("j1", T + 1),
             heartbeat("j1", T + 2), complete("j1", T + 2)),
    scenario("put.of-a-failed-job", put("j1"), pop(), fail("j1", T + 1),
             put("j1", T + 2), call("failed", T + 2), get("j1", T + 2),
             call("stats", T + 2, "q", T)),
    scenario("put.of-a-complete-job", put("j1"), pop(), complete("j1", T + 1),
             put("j1", T + 2, q="q2"), call("jobs", T + 2, "complete"), get("j1", T + 2)),
    scenario("put.errors", call("put", T, "q"), call("put", T, "q", "j1"),
             call("put", T, "q", "j1", "K", "{bad", 0), call("put", T, "q", "j1", "K", "{}"),
             call("put", T, "q", "j1", "K", "{}", "soon"),
             call("put", T, "q", "j1", "K", "{}", 0, "priority", "high"),
             call("put", T, "q", "j1", "K", "{}", 0, "retries", "x"),
             call("put", T, "q", "j1", "K", "{}", 0, "tags", "{bad"),
             call("put", T, "q", "j1", "K", "{}", 0, "depends", "nope")),
    scenario("put.odd-options", call("put", T, "q", "j1", "K", "{}", 0, "priority",
                                     differs=CLEARER)),
    scenario("put.priority-not-finite", call("put", T, "q", "j1", "K", "{}", 0, "priority",
                                              "inf", differs=NOT_FINITE)),
    scenario("put.tags-hold-an-object", call(
        "put", T, "q", "j1", "K", "{}", 0, "tags", '[{"a": 1}]', differs="tags must be strings "
        "or numbers; qless-core fails half-way, leaving the put's history entry behind")),
    scenario("put.failed-job-into-another-queue", put("a"), pop(), fail("a", T + 1),
             put("a", T + 2, q="q2", differs="qless-core takes the failure off the new "
                 "queue's `failed` stat (down to -1), not off the queue it failed in")),
    # pop / peek ----------------------------------------------------------------------------
    scenario("pop.order", *[put(j, T + i, priority=p) for i, (j, p) in enumerate(
        [("a", 0), ("b", 5), ("c", 0), ("d", -3), ("e", 5)])],
        peek(T + 10), pop(T + 10, count=2), peek(T + 10), pop(T + 10, count=10),
        pop(T + 10, count=10)),
    scenario("pop.same-time-and-priority", put("a"), put("b"), put("c"), pop(count=3)),
    scenario("pop.scheduled-due-keeps-put-order", put("late", T + 5), put("early", delay=3),
             pop(T + 6, count=2)),
    scenario("pop.count-and-errors", put("a"), put("b"), pop(count=0), pop(count="x"),
             call("pop", T, "q"), peek(count="x"), pop(worker="w2", count=5),
             pop(worker="w3", count=5), call("workers", T)),
    scenario("peek.changes-nothing-but-due-jobs", put("a", delay=1), put("b"), peek(T + 2),
             call("jobs", T + 2, "scheduled", "q")),
    scenario("pop.empty-queue", pop(q="none"), peek(q="none"), call("queues", T),
             call("workers", T)),
    # heartbeat -----------------------------------------------------------------------------
    scenario("heartbeat.valid", put("j1"), pop(), heartbeat("j1", T + 20),
             heartbeat("j1", T + 30, "w1", '{"p": 1}'), get("j1", T + 30),
             call("workers", T + 30, "w1")),
    scenario("heartbeat.per-queue-config", config("heartbeat", 100), config("q-heartbeat", 30),
             put("j1"), pop(), heartbeat("j1", T + 10), put("j2", q="other"),
             pop(q="other"), heartbeat("j2", T + 10)),
    scenario("heartbeat.refused", put("j1"), heartbeat("j1"), heartbeat("nope"), pop(),
             heartbeat("j1", T + 1, "w2"), call("heartbeat", T, "j1"),
             heartbeat("j1", T + 1, "w1", "{bad")),
    scenario("heartbeat.after-expiry", put("j1"), pop(), heartbeat("j1", T + 100),
             pop(T + 101, worker="w2")),
    scenario("heartbeat.negative-config", config("heartbeat", -10), put("j1"), put("j2"),
             pop(), call("jobs", T, "stalled", "q"), call("workers", T, "w1"),
             pop(T, worker="w2"), pop(T + 11, worker="w2"), heartbeat("j1", T + 12, "w2")),
    # complete ------------------------------------------------------------------------------
    scenario("complete.plain", put("j1", tags=["t"]), pop(T + 2), complete("j1", T + 5,
             data='{"done": true}'), get("j1", T + 5), call("jobs", T + 5, "complete"),
             call("tag", T + 5, "get", "t")),
    scenario("complete.next", put("j1", priority=3), pop(T + 1), complete("j1", T + 2,
             next="q2"), get("j1", T + 2), pop(T + 3, q="q2"), complete("j1", T + 4, q="q2")),
    scenario("complete.next-with-delay", put("j1"), pop(), complete(
        "j1", T + 1, next="q2", delay=10, differs="qless-core leaves the job's state `waiting` "
        "while it sits in the next queue's scheduled set; ours says `scheduled`")),
    scenario("complete.missing-data", put("j1"), pop(), call(
        "complete", T, "j1", "w1", "q", differs=CLEARER)),
    scenario("complete.next-with-depends", put("a"), put("j1"), pop(), complete(
        "j1", T + 1, next="q2", depends=["a", "nope"]), get("j1", T + 1), pop(T + 2, count=2),
        complete("a", T + 3), get("j1", T + 3)),
    scenario("complete.option-errors", put("j1"), pop(),
             complete("j1", T + 1, next="q2", delay=5, depends=["x"]),
             complete("j1", T + 1, delay=5), complete("j1", T + 1, depends=["x"]),
             complete("j1", T + 1, data="{bad"), call("complete", T + 1, "j1"),
             call("complete", T + 1, "j1", "w1"), complete("j1", T + 1, next="q2",
                                                          depends="{bad")),
    scenario("complete.refused", put("j1"), complete("nope"), complete("j1"), pop(),
             complete("j1", T + 1, worker="w2"), complete("j1", T + 2), complete("j1", T + 3)),
    scenario("complete.wrong-queue", put("j1"), pop(), complete(
        "j1", T + 1, q="other", differs="qless-core takes the job out of the named queue's sets "
        "only, leaving its lock in its own queue to be handed out again; ours refuses")),
    scenario("complete.releases-dependents", put("a"), put("b", depends=["a"]),
             put("c", depends=["a"]), pop(), complete("a", T + 1), peek(T + 1)),
    scenario("complete.prunes-by-count", config("jobs-history-count", 2),
             *[s for i, j in enumerate(["a", "b", "c"]) for s in (
                 put(j, T + i, tags=["t"]), pop(T + i), complete(j, T + i + 0.5))],
             call("jobs", T + 3, "complete"), call("tag", T + 3, "get", "t")),
    scenario("complete.prunes-by-age", config("jobs-history", 100), put("a"), pop(),
             complete("a", T + 1), put("b", T + 50), pop(T + 50), complete("b", T + 102),
             call("jobs", T + 102, "complete")),
    scenario("data.as-given", put("j1"), pop(), complete(
        "j1", T + 1, data='{"list": [], "big": 12345678901234567}', differs="qless-core "
        "re-encodes data with cjson: [] becomes {} and numbers keep 14 significant digits; "
        "ours stores the caller's text")),
    # fail / failed -------------------------------------------------------------------------
    scenario("fail.running", put("j1"), pop(), fail("j1", T + 1, "w1", "boom", "it broke",
             '{"why": 1}'), get("j1", T + 1), call("failed", T + 1),
             call("failed", T + 1, "boom"), call("stats", T + 1, "q", T)),
    scenario("fail.not-running", put("j1"), fail("j1"), fail("nope"),
             call("fail", T, "j1", "w1"), call("fail", T, "j1", "w1", "g")),
    scenario("fail.other-worker", put("j1"), pop(), fail(
        "j1", T + 1, "w2", differs="qless-core lets any worker fail a job, and leaves it in its "
        "holder's ql:w:<worker>:jobs; ours refuses (issue 17)")),
    scenario("fail.twice", put("j1"), pop(), fail("j1", T + 1), fail("j1", T + 2)),
    scenario("failed.listings", *[s for i in range(4) for s in (
        put(f"j{i}", T + i), pop(T + i), fail(f"j{i}", T + i, "w1", "even" if i % 2 else "odd"))],
        call("failed", T + 5), call("failed", T + 5, "odd"),
        call("failed", T + 5, "odd", 1, 1), call("failed", T + 5, "odd", 0, 1),
        call("failed", T + 5, "none"), call("failed", T + 5, "odd", "x")),
    # retry ---------------------------------------------------------------------------------
    scenario("retry.retries-left", put("j1", retries=2), pop(), retry("j1", T + 1),
             get("j1", T + 1), pop(T + 2), retry("j1", T + 3, "q", "w1", 10),
             get("j1", T + 3), pop(T + 10), pop(T + 13)),
    scenario("retry.exhausted", put("j1", retries=0), pop(), retry("j1", T + 1),
             get("j1", T + 1), call("failed", T + 1, "failed-retries-q")),
    scenario("retry.group-and-message", put("j1", retries=1), pop(),
             retry("j1", T + 1, "q", "w1", 0, "oops", "went wrong"), get("j1", T + 1),
             pop(T + 2), retry("j1", T + 3, "q", "w1", 0, "oops", "again"),
             get("j1", T + 3), call("failed", T + 3)),
    scenario("retry.to-another-queue", put("j1"), pop(), retry(
        "j1", T + 1, "q2", differs="qless-core puts the job in the named queue's work set while "
        "its hash keeps the old queue; ours refuses")),
    scenario("retry.refused", put("j1"), retry("j1"), retry("nope"), pop(),
             retry("j1", T + 1, "q", "w2"), retry("j1", T + 1, "q", "w1", "x"),
             call("retry", T + 1, "j1"), call("retry", T + 1, "j1", "q")),
    # requeue (qless-core 0.11.4 has none; ours is put refusing a job that does not exist) ----
    scenario("requeue.existing", put("j1"), pop(), call(
        "requeue", T + 1, "q2", "j1", "K", "{}", 0, "priority", 2,
        theirs=("put", ["q2", "j1", "K", "{}", 0, "priority", 2])), get("j1", T + 1)),
    scenario("requeue.missing", call("requeue", T, "q", "nope", "K", "{}", 0,
                                     differs="qless-core 0.11.4 has no requeue command")),
    # cancel --------------------------------------------------------------------------------
    scenario("cancel.waiting", put("j1", tags=["t"]), call("cancel", T + 1, "j1"),
             get("j1", T + 1), call("cancel", T + 1, "nope"), call("cancel", T + 1)),
    scenario("cancel.running", put("j1"), pop(), call("cancel", T + 1, "j1"),
             call("workers", T + 1, "w1")),
    scenario("cancel.with-dependents", put("a"), put("b", depends=["a"]),
             call("cancel", T, "a"), call("cancel", T, "b", "a"), get("a")),
    scenario("cancel.dependent-only", put("a"), put("b", depends=["a"]),
             call("cancel", T, "b"), get("a")),
    scenario("cancel.failed", put("j1"), pop(), fail("j1", T + 1), call("cancel", T + 2, "j1"),
             call("failed", T + 2), call("stats", T + 2, "q", T)),
    scenario("cancel.complete", put("j1"), pop(), complete("j1", T + 1),
             call("cancel", T + 2, "j1"), get("j1", T + 2)),
    scenario("cancel.tracked", put("j1"), call("track", T, "track", "j1"),
             call("cancel", T + 1, "j1"), call("track", T + 1)),
    scenario("cancel.scheduled-and-depends", put("a"), put("b", delay=10),
             put("c", depends=["a"]), call("cancel", T, "b", "c", "a")),
    # depends -------------------------------------------------------------------------------
    scenario("depends.on-off", put("a"), put("x"), put("b", depends=["a"]),
             call("depends", T, "b", "on", "x", "nope"), get("b"),
             call("depends", T + 1, "b", "off", "a"), get("b", T + 1),
             call("depends", T + 2, "b", "off", "x"), get("b", T + 2), peek(T + 2)),
    scenario("depends.off-all", put("a"), put("x"), put("b", depends=["a", "x"]),
             call("depends", T + 1, "b", "off", "all"), get("b", T + 1), get("a", T + 1)),
    scenario("depends.refused", put("a"), call("depends", T, "a", "on", "x"),
             call("depends", T, "nope", "on", "x"), put("b", depends=["a"]),
             call("depends", T, "b", "sideways", "a"), call("depends", T, "b")),
    # priority ------------------------------------------------------------------------------
    scenario("priority.reorders-waiting", put("a"), put("b", T + 1), put("c", T + 2),
             call("priority", T + 3, "a", -5), call("priority", T + 3, "c", 10), peek(T + 3),
             pop(T + 3, count=3)),
    scenario("priority.running-and-complete", put("a"), pop(), call("priority", T, "a", 3),
             complete("a", T + 1), call("priority", T + 1, "a", 4), get("a", T + 1)),
    scenario("priority.refused", put("a"), call("priority", T, "a", "high"),
             call("priority", T, "a")),
    scenario("priority.of-a-missing-job", call("priority", T, "nope", 1, differs=CLEARER)),
    # tags ----------------------------------------------------------------------------------
    scenario("tag.add-remove-get", put("a", tags=["x"]), put("b"),
             call("tag", T + 1, "add", "a", "y", "z"), call("tag", T + 1, "add", "b", "y"),
             call("tag", T + 2, "get", "y"), call("tag", T + 2, "get", "y", 1, 1),
             call("tag", T + 2, "get", "nope"), call("tag", T + 3, "remove", "a", "x"),
             get("a", T + 3), call("tag", T + 3, "top"), call("tag", T + 3, "top", 0, 1)),
    scenario("tag.top-counts", *[put(f"j{i}", T + i, tags=["common", f"own{i}"])
                                 for i in range(3)],
             call("tag", T + 3, "top"), call("cancel", T + 3, "j0", "j1"),
             call("tag", T + 3, "top")),
    scenario("tag.add-again-counts-once", put("a", tags=["x"]), call(
        "tag", T, "add", "a", "x", differs="qless-core counts a tag in ql:tags again when it is "
        "added to a job that has it; ours counts real changes only")),
    scenario("tag.remove-absent-counts-nothing", put("a"), call(
        "tag", T, "remove", "a", "w", differs="qless-core counts a tag down in ql:tags (below 0) "
        "when it is removed from a job that lacks it; ours counts real changes only")),
    scenario("tag.refused", call("tag", T), call("tag", T, "add", "nope", "x"),
             call("tag", T, "remove", "nope", "x"), call("tag", T, "frob"),
             call("tag", T, "get"), call("tag", T, "top", "x")),
    # track ---------------------------------------------------------------------------------
    scenario("track.events", put("j1"), call("track", T, "track", "j1"), put("j1", T + 1),
             pop(T + 2), heartbeat("j1", T + 3), fail("j1", T + 4), put("j1", T + 5),
             pop(T + 6), complete("j1", T + 7), call("track", T + 8),
             call("track", T + 8, "untrack", "j1"), call("track", T + 8)),
    scenario("track.listing-and-refused", put("a"), put("b"), call("track", T, "track", "a"),
             call("track", T + 1, "track", "b"), call("track", T + 2),
             call("track", T, "track", "nope"), call("track", T, "frob", "a"),
             call("track", T, "track"), get("a")),
    # recur ---------------------------------------------------------------------------------
    scenario("recur.interval-spawns", recur("r", interval=60, offset=0, priority=2,
                                            tags=["t"], retries=3), call("recur.get", T, "r"),
             call("jobs", T, "recurring", "q"), pop(T), pop(T + 130, count=5),
             get("r-1", T + 130), get("r-3", T + 130), call("recur.get", T + 130, "r"),
             peek(T + 130), call("tag", T + 130, "get", "t")),
    scenario("recur.offset-and-peek", recur("r", interval=30, offset=10), peek(T + 5),
             peek(T + 10), call("length", T + 10, "q"), pop(T + 75, count=10)),
    scenario("recur.re-recur-keeps-count", recur("r"), pop(T + 1), recur("r", T + 55,
             data='{"v": 2}'), pop(T + 56), get("r-2", T + 56), complete("r-1", T + 57),
             call("recur.get", T + 57, "r")),
    scenario("recur.move-queue", recur("r", q="q1"), recur("r", T + 1, q="q2"),
             call("jobs", T + 1, "recurring", "q1"), call("jobs", T + 1, "recurring", "q2")),
    scenario("recur.backlog", recur("r", interval=10, offset=0, backlog=2),
             pop(T + 100, count=10)),
    scenario("recur.update", recur("r"),
             call("recur.update", T, "r", "priority", 5, "retries", 1, "data", '{"n": 1}',
                  "klass", "K2", "backlog", 3),
             call("recur.update", T, "r", "interval", 90), call("recur.get", T, "r"),
             call("recur.update", T, "r", "queue", "q2"), call("queues", T),
             call("recur.get", T, "r"), pop(T + 1, q="q2"), get("r-1", T + 1)),
    scenario("recur.update-refused", recur("r"), call("recur.update", T, "nope", "priority", 1),
             call("recur.update", T, "r", "frob", 1),
             call("recur.update", T, "r", "priority", "x"),
             call("recur.update", T, "r", "data", "{bad"),
             call("recur.update", T, "r", "backlog", "x"),
             call("recur.update", T, "r", "priority")),
    scenario("recur.tag-untag", recur("r", tags=["a"]), call("recur.tag", T, "r", "b", "a"),
             call("recur.untag", T, "r", "a", "c"), call("recur.get", T, "r"),
             call("recur.tag", T, "nope", "x"), call("recur.untag", T, "nope", "x"),
             pop(T), get("r-1")),
    scenario("recur.unrecur", recur("r"), call("unrecur", T, "r"), call("recur.get", T, "r"),
             call("unrecur", T, "r"), pop(T + 100)),
    scenario("recur.refused", recur("r", interval=0), recur("r", interval="x"),
             recur("r", offset="x"), recur("r", spec="cron"), recur("r", data="{bad"),
             recur("r", priority="x"), recur("r", retries="x"), recur("r", backlog="x"),
             recur("r", tags="{bad"), call("recur", T, "q", "r", "K", "{}")),
    scenario("recur.tags-hold-a-list", recur("r", tags=[[1]], differs="tags must be strings "
             "or numbers; qless-core stores the template, and every spawn of it then fails")),
    scenario("recur.odd-options", call("recur", T, "q", "r", "K", "{}", "interval", 60, 0,
                                       "priority", differs=CLEARER)),
    scenario("recur.spawn-over-an-existing-job", recur("r"), pop(), call("unrecur", T, "r"),
             recur("r", T + 1), pop(T + 1, worker="w2", differs="the template's count "
                                   "restarted, so r-1 is due again while the first r-1 runs: "
                                   "qless-core overwrites it, ours skips jids that exist")),
    scenario("recur.update-all-or-nothing", recur("r"), call(
        "recur.update", T, "r", "priority", 5, "frob", 1, differs="qless-core applies the "
        "options before the bad one; ours checks them all first")),
    scenario("recur.update-interval-zero", recur("r"), call(
        "recur.update", T, "r", "interval", 0, differs="recur refuses an interval <= 0; "
        "qless-core's recur.update takes it (pop then spawns without end)")),
    # unfail --------------------------------------------------------------------------------
    scenario("unfail", *[s for i in range(3) for s in (
        put(f"j{i}", T + i, retries=2), pop(T + i), fail(f"j{i}", T + i, "w1", "g"))],
        call("unfail", T + 5, "q2", "g", 2), call("failed", T + 5, "g"), get("j0", T + 5),
        peek(T + 5, q="q2"), call("unfail", T + 6, "q2", "g"), call("failed", T + 6),
        call("unfail", T + 6, "q2", "none"), call("unfail", T + 6, "q2", "g", "x"),
        call("unfail", T + 6, "q2")),
    # stats ---------------------------------------------------------------------------------
    scenario("stats.wait-and-run", *[put(f"j{i}", T - w) for i, w in enumerate(
        [0, 0.5, 1, 59, 60, 119, 3599, 3600, 7300, 86399, 86400, 200000])],
        pop(T, count=20),
        *[complete(f"j{i}", T + r) for i, r in enumerate(
            [1, 2, 4, 61, 3700, 90000, 5, 5, 5, 5, 5, 5])],
        call("stats", T, "q", T), call("stats", T, "q", NEXT_DAY),
        call("stats", T, "q", T - DAY), call("stats", T, "none", T)),
    scenario("stats.failures-and-retries", put("a", retries=0), put("b"), pop(count=2),
             fail("a", T + 1), pop(T + 61, worker="w2"), pop(T + 72, worker="w2"),
             call("stats", T + 72, "q", T), put("a", T + 73), call("stats", T + 73, "q", T)),
    scenario("stats.refused", call("stats", T, "q"), call("stats", T, "q", "x")),
    # config --------------------------------------------------------------------------------
    scenario("config", call("config.get", T), call("config.get", T, "heartbeat"),
             call("config.get", T, "grace-period"), call("config.get", T, "nope"),
             config("heartbeat", 30), config("custom", "x"), call("config.get", T),
             call("config.get", T, "heartbeat"), call("config.unset", T, "heartbeat"),
             call("config.get", T, "heartbeat"), call("config.unset", T, "nope"),
             call("config.set", T, "k"), call("config.set", T), call("config.unset", T)),
    # queues / workers ----------------------------------------------------------------------
    scenario("queues.counts", put("a", q="q1"), put("b", q="q1", delay=5),
             put("c", q="q1", depends=["a"]), recur("r", q="q1"), put("d", q="q2"),
             pop(q="q2"), call("queues", T), call("queues", T, "q1"),
             call("queues", T + 61), call("queues", T, "none")),
    scenario("workers.listing", put("a"), put("b"), pop(worker="w1"), pop(T + 1, worker="w2"),
             call("workers", T + 1), call("workers", T + 1, "w1"),
             call("workers", T + 1, "none"), call("workers", T + 61),
             call("workers", T + 61, "w1"), call("workers", T + DAY + 1)),
    scenario("workers.max-age", config("max-worker-age", 100), put("a"), pop(),
             call("workers", T + 50), call("workers", T + 101)),
    scenario("worker.deregister", put("a"), pop(worker="w1"), pop(worker="w2"),
             call("worker.deregister", T, "w1", "nope"), call("workers", T),
             call("worker.deregister", T)),
    # pause / unpause -----------------------------------------------------------------------
    scenario("pause", put("a"), call("pause", T, "q", "q2"), pop(), call("queues", T),
             peek(), call("unpause", T, "q"), pop(T + 1), call("queues", T + 1),
             call("pause", T), call("unpause", T)),
    # timeout -------------------------------------------------------------------------------
    scenario("timeout", put("a"), put("b"), pop(count=2), call("timeout", T + 1, "a"),
             get("a", T + 1), call("jobs", T + 1, "stalled", "q"), peek(T + 1),
             pop(T + 2, worker="w2"), call("timeout", T + 3, "nope"),
             call("timeout", T + 3, "b", "a")),
    scenario("timeout.not-running", put("a"), call("timeout", T, "a")),
    # lock expiry and the grace period ------------------------------------------------------
    scenario("lock.grace-period", put("a", retries=2), pop(), pop(T + 60, worker="w2"),
             get("a", T + 60), call("jobs", T + 60, "stalled", "q"), peek(T + 61),
             pop(T + 65, worker="w2"), pop(T + 70, worker="w2"), get("a", T + 70),
             complete("a", T + 71), heartbeat("a", T + 71, "w2")),
    scenario("lock.grace-period-zero", config("grace-period", 0), put("a"), pop(),
             pop(T + 60, worker="w2"), get("a", T + 60)),
    scenario("lock.retries-exhausted", put("a", retries=0), pop(), pop(T + 60, worker="w2"),
             pop(T + 70, worker="w3"), get("a", T + 70), call("failed", T + 70)),
    scenario("lock.expired-retry-after-grace", put("a"), pop(), pop(T + 60, worker="w2"),
             retry("a", T + 61), get("a", T + 61)),
    # max-concurrency -----------------------------------------------------------------------
    scenario("max-concurrency", config("q-max-concurrency", 2),
             *[put(f"j{i}", T + i) for i in range(4)], pop(T + 5, count=3),
             pop(T + 5, worker="w2"), complete("j0", T + 6), pop(T + 6, worker="w2", count=3),
             pop(T + 70, worker="w3", count=3), config("q-max-concurrency", 0),
             pop(T + 71, worker="w3", count=3)),
    # log / length / jobs -------------------------------------------------------------------
    scenario("log", put("a"), call("log", T + 1, "a", "note"),
             call("log", T + 2, "a", "note", '{"k": [1]}'), get("a", T + 2),
             call("log", T, "nope", "x"), call("log", T, "a", "x", "{bad"),
             call("log", T, "a"), call("log", T)),
    scenario("length", put("a"), put("b", delay=5), put("c", depends=["a"]), put("d"), pop(),
             call("length", T, "q"), call("length", T, "none")),
    scenario("jobs.listings", put("a"), put("b", delay=5), put("c", depends=["a"]),
             put("d"), put("e"), pop(count=2), recur("r"),
             call("jobs", T, "running", "q"), call("jobs", T, "running", "q", 1, 1),
             call("jobs", T + 61, "stalled", "q"), call("jobs", T, "scheduled", "q"),
             call("jobs", T, "depends", "q"), call("jobs", T, "recurring", "q"),
             call("jobs", T, "waiting", "q"), call("jobs", T), call("jobs", T, "running"),
             call("jobs", T, "running", "q", "x"), complete("a", T + 1),
             call("jobs", T + 1, "complete"), call("jobs", T + 1, "complete", 0, 1),
             call("jobs", T + 1, "complete", "x")),
    # interplay ------------------------------------------------------------------------------
    scenario("interplay.re-put-with-delay-while-depending", put("a"), put("b", depends=["a"]),
             put("b", T + 1, delay=10), get("b", T + 1), pop(T + 2), complete(
                 "a", T + 3, differs="qless-core releases b into the work set although it waits "
                 "in the scheduled set (it is then in both); ours leaves it scheduled")),
    scenario("interplay.tracked-stall-and-exhaustion", put("a", retries=0),
             call("track", T, "track", "a"), pop(), pop(T + 60, worker="w2"),
             pop(T + 70, worker="w3"), call("track", T + 70)),
    scenario("interplay.tracked-complete-with-next", put("a"), call("track", T, "track", "a"),
             pop(), complete("a", T + 1, next="q2"), pop(T + 2, q="q2"),
             retry("a", T + 3, "q2"), pop(T + 4, q="q2"), complete("a", T + 5, q="q2")),
    scenario("interplay.timeout-then-complete", put("a"), pop(), call("timeout", T + 1, "a"),
             complete("a", T + 2), heartbeat("a", T + 2), pop(T + 3, worker="w2"),
             complete("a", T + 4, worker="w2")),
    scenario("interplay.depends-on-a-failed-job", put("a"), pop(), fail("a", T + 1),
             put("b", T + 2, depends=["a"]), get("b", T + 2), put("a", T + 3), pop(T + 4),
             complete("a", T + 5), get("b", T + 5)),
    scenario("interplay.cancel-in-grace-period", put("a"), pop(), pop(T + 60, worker="w2"),
             call("cancel", T + 61, "a"), call("workers", T + 61), pop(T + 71, worker="w2")),
    scenario("interplay.heartbeat-in-grace-period", put("a"), pop(), pop(T + 60, worker="w2"),
             heartbeat("a", T + 65), get("a", T + 65), pop(T + 125, worker="w2"),
             get("a", T + 125)),
    scenario("interplay.complete-in-grace-period", put("a"), put("b", T + 1), pop(),
             pop(T + 60, worker="w2"), complete("a", T + 65), pop(T + 71, worker="w3"),
             call("workers", T + 71), call("stats", T + 71, "q", T)),
    scenario("interplay.lost-lock-then-retry", put("a"), pop(), pop(T + 60, worker="w2"),
             pop(T + 70, worker="w2"), retry("a", T + 71), complete("a", T + 71),
             heartbeat("a", T + 71), retry("a", T + 72, "q", "w2"), get("a", T + 72)),
    scenario("interplay.max-concurrency-and-expired-locks", config("q-max-concurrency", 1),
             put("j0"), put("j1", T + 1), pop(T + 2), pop(T + 62, worker="w2"),
             pop(T + 63, worker="w3"), pop(T + 73, worker="w3")),
    scenario("interplay.recur-pop-count-limits-spawns", recur("r", interval=10),
             pop(T + 100, count=2), call("recur.get", T + 100, "r"), pop(T + 100, count=20),
             call("recur.get", T + 100, "r")),
    scenario("interplay.recur-update-interval-after-spawn", recur("r"), pop(),
             call("recur.update", T + 1, "r", "interval", 30), pop(T + 29), pop(T + 30),
             pop(T + 60, count=5)),
    scenario("interplay.re-put-keeps-tags-priority-retries", put("a", priority=3, tags=["x"],
             retries=2), put("a", T + 1, q="q2"), get("a", T + 1),
             call("tag", T + 1, "get", "x")),
    scenario("interplay.priority-of-scheduled-and-depends", put("a", delay=10),
             put("b", depends=["a"]), call("priority", T, "a", 5), call("priority", T, "b", 6),
             call("jobs", T, "scheduled", "q"), pop(T + 10), complete("a", T + 11),
             peek(T + 11)),
    scenario("interplay.put-into-paused-queue-and-unfail", call("pause", T, "q"), put("a"),
             pop(), call("unpause", T, "q"), pop(), fail("a", T + 1),
             call("unfail", T + 2, "q", "g", 10), peek(T + 2)),
    scenario("interplay.re-put-depending-on-itself", put("a"), put("a", T + 1, depends=["a"]),
             get("a", T + 1), peek(T + 1)),
    scenario("interplay.timeout-in-grace-period", put("a"), pop(), pop(T + 60, worker="w2"),
             call("timeout", T + 61, "a"), pop(T + 62, worker="w2"), get("a", T + 62)),
    scenario("interplay.recur-tags-follow-the-template", recur("r", tags=["t"]), pop(),
             call("recur.tag", T + 1, "r", "u"), call("recur.untag", T + 1, "r", "t"),
             pop(T + 60), call("tag", T + 60, "top"), call("tag", T + 60, "get", "u"),
             call("cancel", T + 61, "r-1", "r-2"), call("tag", T + 61, "get", "t")),
    scenario("interplay.one-worker-two-queues", put("a", q="q1"), put("b", q="q2"),
             pop(q="q1"), pop(T + 1, q="q2"), call("workers", T + 2, "w1"),
             call("jobs", T + 61, "stalled", "q1"), call("workers", T + 61),
             complete("b", T + 62, q="q2")),
    scenario("fail.bad-data", put("a"), pop(), fail("a", T + 1, "w1", "g", "m", "{bad"),
             get("a", T + 1)),
    # data left by another writer ------------------------------------------------------------
    scenario("legacy.history-field",
             plain("HSET", "ql:j:old", "jid", "old", "klass", "K", "data", "{}", "priority", 0,
                   "tags", "[]", "state", "waiting", "worker", "", "expires", 0, "queue", "q",
                   "retries", 5, "remaining", 5, "history",
                   '[{"q":"q","put":1699999000.5,"popped":1699999100,"worker":"w0",'
                   '"failed":1699999200},{"q":"q","put":1699999300}]'),
             plain("ZADD", "ql:q:q-work", -0.17, "old"), plain("ZADD", "ql:queues", T, "q"),
             get("old"), pop(T + 1), complete("old", T + 2)),
    scenario("legacy.history-field-on-pop",
             plain("HSET", "ql:j:old", "jid", "old", "klass", "K", "data", "{}", "priority", 0,
                   "tags", "[]", "state", "waiting", "worker", "", "expires", 0, "queue", "q",
                   "retries", 5, "remaining", 5, "history", '[{"q":"q","put":1699999000}]'),
             plain("ZADD", "ql:q:q-work", -0.17, "old"), pop(T + 1), get("old", T + 1)),
    # queue.forget / bad calls --------------------------------------------------------------
    scenario("queue.forget", put("a", q="q1"), put("b", q="q2"),
             call("queue.forget", T, "q1", "none"), call("queues", T), peek(q="q1")),
    scenario("bad-calls", call("frob", T), call("get", T)),
    scenario("bad-calls.now", call("get", "soon", "a", differs=CLEARER)),
    scenario("log.data-not-an-object", put("a"), call(
        "log", T, "a", "note", 5, differs="log data must be a JSON object or array: qless-core "
        "stores 5, and every later `get` of the job fails")),
    scenario("config.non-numeric-heartbeat", config("heartbeat", "soon"), put("a"),
             pop(differs="a clear error for a non-numeric option; qless-core fails on "
                 "arithmetic with nil")),
    scenario("legacy.history-without-put",
             plain("HSET", "ql:j:old", "jid", "old", "klass", "K", "data", "{}", "priority", 0,
                   "tags", "[]", "state", "waiting", "worker", "", "expires", 0, "queue", "q",
                   "retries", 5, "remaining", 5, "history",
                   '[{"q":"q","popped":1699999100,"worker":"w0"}]'),
             get("old", differs="readers tolerate a legacy history stage without `put`; "
                 "qless-core's get fails on it")),
]


@pytest.fixture(scope="module")
def pair(redis_server: RedisServer) -> Iterator[Pair]:
    both = Pair(redis_server.url)
    yield both
    both.close()


@pytest.fixture
def clean(pair: Pair) -> Pair:
    pair.reset()
    return pair


def epilogue(pair: Pair, case: Scenario) -> list[Step]:
    """Read calls over everything qless-core's side holds after ``case``, at its latest time."""
    now = max((s.now for s in case.steps if not s.plain and not isinstance(s.now, str)),
              default=T)
    steps = [call("queues", now), call("workers", now), call("failed", now),
             call("track", now), call("config.get", now)]
    for key in sorted(pair.theirs.conn.scan_iter("ql:j:*")):
        jid = key[len("ql:j:"):]
        if not jid.endswith(("-history", "-dependents", "-dependencies")):
            steps.append(call("get", now, jid))
    for key in sorted(pair.theirs.conn.scan_iter("ql:r:*")):
        steps.append(call("recur.get", now, key[len("ql:r:"):]))
    for queue in pair.theirs.conn.zrange("ql:queues", 0, -1):
        steps += [call("stats", now, queue, now), call("length", now, queue)]
    return steps


@pytest.mark.parametrize("case", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(clean: Pair, case: Scenario) -> None:
    problems = play(clean, case)
    if not problems and case.steps[-1].differs is None:
        problems = play(clean, Scenario(f"{case.name} (epilogue)",
                                        tuple(epilogue(clean, case))))
    assert not problems, "\n".join(problems)


def test_scenario_names_are_unique() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))


# ------------------------------------------------------------------------------------------
# The harness itself: qless-core against itself agrees, and a planted change is seen
# ------------------------------------------------------------------------------------------


@pytest.fixture
def self_pair(redis_server: RedisServer) -> Iterator[Pair]:
    both = Pair(redis_server.url, our_source_text=their_source())
    yield both
    both.close()


def test_qless_core_agrees_with_itself_on_every_scenario(self_pair: Pair) -> None:
    """The comparison is deterministic (no normalisation missing); scenarios that mark an
    intended difference are played up to that step."""
    for case in SCENARIOS:
        self_pair.reset()
        steps = tuple(s for s in case.steps if s.differs is None and s.theirs is None)
        assert play(self_pair, Scenario(case.name, steps)) == []


@pytest.mark.parametrize(("change", "where"), [
    (("'grace-period']       = 10", "'grace-period']       = 11"), "reply"),
    (("priority - (now / 10000000000)", "priority + (now / 10000000000)"), "state['ql:q:q-work']"),
    (("Qless.publish('log', cjson.encode({\n        jid   = jid,\n        event = 'put',",
      "Qless.publish('log2', cjson.encode({\n        jid   = jid,\n        event = 'put',"),
     "published"),
    (("error('Fail(): Job not currently running: ' .. state)",
      "error('Fail(): Job is not currently running: ' .. state)"), "reply"),
])
def test_a_planted_change_is_reported(redis_server: RedisServer, change: tuple[str, str],
                                      where: str) -> None:
    planted = their_source()
    assert change[0] in planted
    both = Pair(redis_server.url, our_source_text=planted.replace(*change))
    try:
        case = Scenario("planted", (call("config.get", T, "grace-period"), put("a"), put("b"),
                                    put("c", T + 1, priority=1), fail("a")))
        [problem] = play(both, case)
        assert f"\n  {where}" in problem, problem
    finally:
        both.close()


def test_error_messages_lose_only_the_redis_wrappers() -> None:
    sha = "0" * 40
    assert error_message(f"ERR user_script:871: Put(): Arg x script: {sha}, on "
                         "@user_script:871.") == "Put(): Arg x"
    assert error_message("Complete(): Job does not exist") == "Complete(): Job does not exist"
    assert compare(Outcome(Error("a"), {}), Outcome(Error("a"), {})) == []
    assert compare(Outcome({"x": 1}, {}), Outcome({"x": 1.0}, {})) != []
    assert compare(Outcome(json.loads("{}"), {}), Outcome([], {})) != []


def test_only_listed_extension_fields_are_left_out() -> None:
    job = {"ql:j:r-1": ("hash", {"jid": "r-1"})}
    extended = {"ql:j:r-1": ("hash", {"jid": "r-1", "spawned_from_jid": "r"})}
    assert compare(Outcome(None, job), Outcome(None, extended)) == []
    assert compare(Outcome(None, extended), Outcome(None, job)) != []      # ours lacks it
    other = {"ql:j:r-1": ("hash", {"jid": "r-1", "colour": "red"})}
    assert compare(Outcome(None, job), Outcome(None, other)) != []
