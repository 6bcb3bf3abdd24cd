"""Statistics of the qless script, as qless-core keeps them: per queue and per day
(``ql:s:wait:<day>:<queue>``, ``ql:s:run:<day>:<queue>``, ``ql:s:stats:<day>:<queue>``), a
Welford mean and ``vk`` (sum of squared deviations), and a histogram of 148 buckets: seconds
0-59, minutes 1-59, hours 1-23, days 1-6. Expected values are computed by hand here; every test
runs on our script and on qless-core's (the ``q`` fixture of tests/qless/test_lua.py)."""

from __future__ import annotations

import math

import pytest

from tests.qless.test_lua import DAY0, T0, Script, hash_of, pop_jids, put, q

__all__ = ["q"]  # the fixture

DAY = 86400

#: The histogram's buckets, in the order of the `stats` reply.
BUCKETS = ([f"s{i}" for i in range(60)] + [f"m{i}" for i in range(1, 60)]
           + [f"h{i}" for i in range(1, 24)] + [f"d{i}" for i in range(1, 7)])

#: (wait in seconds, the bucket field it is counted in)
BOUNDARIES = [
    (0, "s0"), (0.999, "s0"), (1, "s1"), (59.999, "s59"),
    (60, "m1"), (119.999, "m1"), (3599.999, "m59"),
    (3600, "h1"), (7199.999, "h1"), (86399.999, "h23"),
    (86400, "d1"), (6 * DAY + 5, "d6"), (7 * DAY, "d7"),
]


def test_wait_histogram_through_redis(q: Script) -> None:
    for i, (seconds, _) in enumerate(BOUNDARIES):
        put(q, f"j{i}", now=T0 - seconds)
    assert len(pop_jids(q, count=100, now=T0)) == len(BOUNDARIES)
    stored = hash_of(q, f"ql:s:wait:{DAY0}:q")
    expected: dict[str, int] = {}
    for _, bucket in BOUNDARIES:
        expected[bucket] = expected.get(bucket, 0) + 1
    assert {k: int(v) for k, v in stored.items() if k not in ("total", "mean", "vk")} == expected
    assert len(BUCKETS) == 148
    histogram = q("stats", T0, "q", T0)["wait"]["histogram"]
    assert len(histogram) == 148
    # Waits of 7 days and more are counted in fields the reply does not show.
    assert {BUCKETS[i]: n for i, n in enumerate(histogram) if n} == {
        k: v for k, v in expected.items() if k != "d7"}


def test_run_mean_and_deviation_are_welford_sample_values(q: Script) -> None:
    # Run times 1, 2 and 4 s: mean 7/3; squared deviations 16/9 + 1/9 + 25/9 = 42/9;
    # sample variance 42/9 / 2 = 7/3.
    for i, took in enumerate([1, 2, 4]):
        put(q, f"j{i}", now=T0 + 10 * i)
        pop_jids(q, now=T0 + 10 * i)
        q("complete", T0 + 10 * i + took, f"j{i}", "w1", "q", "{}")
    stored = hash_of(q, f"ql:s:run:{DAY0}:q")
    assert int(stored["total"]) == 3
    assert float(stored["mean"]) == pytest.approx(7 / 3)
    assert float(stored["vk"]) == pytest.approx(42 / 9)
    summary = q("stats", T0, "q", T0)["run"]
    assert summary["count"] == 3
    assert summary["mean"] == pytest.approx(7 / 3)
    assert summary["std"] == pytest.approx(math.sqrt(7 / 3))
    assert summary["histogram"][:5] == [0, 1, 1, 0, 1]
    wait = q("stats", T0, "q", T0)["wait"]
    assert (wait["count"], wait["mean"], wait["std"]) == (3, 0, 0)


def test_one_value_has_no_deviation_and_an_empty_day_is_zero(q: Script) -> None:
    put(q, "j1", now=T0 - 5)
    pop_jids(q, now=T0)
    wait = q("stats", T0, "q", T0)["wait"]
    assert (wait["count"], wait["mean"], wait["std"]) == (1, 5, 0)
    empty = q("stats", T0, "q", T0 - DAY)
    assert empty["wait"] == {"count": 0, "mean": 0, "std": 0, "histogram": [0] * 148}
    assert (empty["failed"], empty["failures"], empty["retries"]) == (0, 0, 0)


def test_stats_are_grouped_by_the_day_of_pop_and_completion(q: Script) -> None:
    midnight = DAY0 + DAY
    put(q, "j1", now=midnight - 10)
    pop_jids(q, now=midnight - 1)                     # waited 9 s: day DAY0
    q("complete", midnight + 2, "j1", "w1", "q", "{}")  # ran 3 s: the next day
    assert q("stats", T0, "q", midnight - 1)["wait"]["count"] == 1
    assert q("stats", T0, "q", midnight - 1)["run"]["count"] == 0
    assert q("stats", T0, "q", midnight)["run"]["mean"] == 3


def test_failure_and_retry_counts(q: Script) -> None:
    put(q, "a")
    put(q, "b")
    pop_jids(q, count=2)
    q("fail", T0 + 1, "b", "w1", "g", "m")            # failures 1, failed 1
    put(q, "b", now=T0 + 2)                            # no longer failed: failed 0
    pop_jids(q, worker="w2", now=T0 + 60)              # a's lock expired: retries 1
    pop_jids(q, worker="w2", now=T0 + 70)
    q("fail", T0 + 71, "b", "w2", "g", "m")            # failures 2, failed 1
    result = q("stats", T0, "q", T0)
    assert (result["failed"], result["failures"], result["retries"]) == (1, 2, 1)
    q("cancel", T0 + 72, "b")                          # a canceled failure: failed 0
    assert q("stats", T0, "q", T0)["failed"] == 0


def test_stats_keys_do_not_expire(q: Script) -> None:
    """qless-core 0.11.4 has a ``stats-history`` option but never expires stats."""
    put(q, "j1")
    pop_jids(q, now=T0)
    assert q.conn.execute("TTL", f"ql:s:wait:{DAY0}:q") == -1
