"""Statistics of the qless script: Welford mean and variance, the histogram buckets of the
document, and how long stats are kept. Expected values are computed by hand here."""

from __future__ import annotations

import pytest

from qless_client import _scripts as s
from qless_client._redis import Redis
from tests.qless.test_lua import DAY0, T0, hash_of, pop_jids, put, r, run

__all__ = ["r"]  # the fixture

DAY = 86400

#: (wait in seconds, the bucket field the document's resolutions put it in)
BOUNDARIES = [
    (0, "s0"), (0.999, "s0"), (1, "s1"), (59.999, "s59"),
    (60, "m1"), (119.999, "m1"), (3599.999, "m59"),
    (3600, "q4"), (4499.999, "q4"), (4500, "q5"), (86399.999, "q95"),
    (86400, "h24"), (90000, "h25"), (259199.999, "h71"),
    (259200, "d3"), (29 * DAY + 5, "d29"), (30 * DAY, "d30"), (100 * DAY, "d30"),
]


def test_the_bucket_list_follows_the_documented_resolutions() -> None:
    # 60 one-second buckets, 59 one-minute buckets (1 min - 1 h), 92 quarter hours
    # (1 h - 24 h), 48 hours (1 day - 3 days), then days 3 .. 30 (30 and more).
    assert len(s.BUCKETS) == 60 + 59 + 92 + 48 + 28 == 287
    assert s.BUCKETS[:2] == ("s0", "s1") and s.BUCKETS[59:61] == ("s59", "m1")
    assert s.BUCKETS[118:120] == ("m59", "q4") and s.BUCKETS[210:212] == ("q95", "h24")
    assert s.BUCKETS[258:260] == ("h71", "d3") and s.BUCKETS[-1] == "d30"
    for seconds, bucket in BOUNDARIES:
        assert s.bucket_of(seconds) == bucket, seconds


def test_wait_histogram_through_redis(r: Redis) -> None:
    for i, (seconds, _) in enumerate(BOUNDARIES):
        put(r, f"j{i}", now=T0 - seconds)
    assert len(pop_jids(r, count=100, now=T0)) == len(BOUNDARIES)
    stored = hash_of(r, f"ql:s:wait:{DAY0}:q")
    expected: dict[str, int] = {}
    for _, bucket in BOUNDARIES:
        expected[bucket] = expected.get(bucket, 0) + 1
    assert {k: int(v) for k, v in stored.items() if k in s.BUCKETS} == expected
    histogram = run(r, s.stats(T0, "q", T0))["wait"]["histogram"]
    assert len(histogram) == 287
    assert {s.BUCKETS[i]: n for i, n in enumerate(histogram) if n} == expected


def test_run_mean_and_variance_are_welford_sample_values(r: Redis) -> None:
    # Run times 1, 2 and 4 s: mean 7/3; squared deviations 16/9 + 1/9 + 25/9 = 42/9;
    # sample variance 42/9 / 2 = 7/3.
    for i, took in enumerate([1, 2, 4]):
        put(r, f"j{i}", now=T0 + 10 * i)
        pop_jids(r, now=T0 + 10 * i)
        run(r, s.complete(T0 + 10 * i + took, f"j{i}", "w1", "q", "{}"))
    stored = hash_of(r, f"ql:s:run:{DAY0}:q")
    assert int(stored["total"]) == 3
    assert float(stored["mean"]) == pytest.approx(7 / 3)
    assert float(stored["vk"]) == pytest.approx(42 / 9)
    summary = run(r, s.stats(T0, "q", T0))["run"]
    assert summary["total"] == 3
    assert summary["mean"] == pytest.approx(7 / 3)
    assert summary["variance"] == pytest.approx(7 / 3)
    assert summary["histogram"][:5] == [0, 1, 1, 0, 1]
    wait = run(r, s.stats(T0, "q", T0))["wait"]
    assert (wait["total"], wait["mean"], wait["variance"]) == (3, 0, 0)


def test_one_value_has_no_variance_and_an_empty_day_is_zero(r: Redis) -> None:
    put(r, "j1", now=T0 - 5)
    pop_jids(r, now=T0)
    wait = run(r, s.stats(T0, "q", T0))["wait"]
    assert (wait["total"], wait["mean"], wait["variance"]) == (1, 5, 0)
    empty = run(r, s.stats(T0, "q", T0 - DAY))
    assert empty["wait"] == {"total": 0, "mean": 0, "variance": 0, "histogram": [0] * 287}
    assert (empty["failed"], empty["failures"], empty["retries"]) == (0, 0, 0)


def test_stats_are_grouped_by_the_day_of_pop_and_completion(r: Redis) -> None:
    midnight = DAY0 + DAY
    put(r, "j1", now=midnight - 10)
    pop_jids(r, now=midnight - 1)                     # waited 9 s: day DAY0
    run(r, s.complete(midnight + 2, "j1", "w1", "q", "{}"))   # ran 3 s: the next day
    assert run(r, s.stats(T0, "q", midnight - 1))["wait"]["total"] == 1
    assert run(r, s.stats(T0, "q", midnight - 1))["run"]["total"] == 0
    assert run(r, s.stats(T0, "q", midnight))["run"]["mean"] == 3


def test_failure_and_retry_counts(r: Redis) -> None:
    put(r, "a")
    put(r, "b")
    pop_jids(r, count=2)
    run(r, s.retry(T0 + 1, "a", "q", "w1"))
    run(r, s.fail(T0 + 2, "b", "w1", "g", "m"))
    put(r, "b", now=T0 + 3)                            # no longer failed
    pop_jids(r, now=T0 + 4)
    run(r, s.fail(T0 + 5, "a", "w1", "g", "m"))
    result = run(r, s.stats(T0, "q", T0))
    assert (result["failed"], result["failures"], result["retries"]) == (1, 2, 1)


def test_stats_keys_expire_after_stats_history_days_of_the_callers_clock(r: Redis) -> None:
    put(r, "j1")
    pop_jids(r, now=T0)
    ttl = r.execute("TTL", f"ql:s:wait:{DAY0}:q")
    assert abs(ttl - (DAY0 + 30 * DAY - T0)) <= 1
    run(r, s.config_set(T0, "stats-history", 1))
    put(r, "j2")
    pop_jids(r, now=T0 + 1)
    assert abs(r.execute("TTL", f"ql:s:wait:{DAY0}:q") - (DAY0 + DAY - T0 - 1)) <= 1
    # A day already past stats-history is not kept: the job failed 3 days ago leaves the
    # failed state now, which updates (and so drops) the stats of its failure's day.
    put(r, "old", now=T0 - 3 * DAY)
    run(r, s.fail(T0 - 3 * DAY, "old", "w", "g", "m"))
    assert r.execute("EXISTS", f"ql:s:stats:{DAY0 - 3 * DAY}:q") == 1
    put(r, "old", now=T0)
    assert r.execute("EXISTS", f"ql:s:stats:{DAY0 - 3 * DAY}:q") == 0


def test_histograms_are_dropped_after_histogram_history_days(r: Redis) -> None:
    put(r, "j1", now=T0 - 5)
    pop_jids(r, now=T0)
    assert run(r, s.stats(T0 + 6 * DAY, "q", T0))["wait"]["histogram"][5] == 1
    later = run(r, s.stats(DAY0 + 7 * DAY, "q", T0))["wait"]
    assert later["histogram"] == [0] * 287 and later["total"] == 1 and later["mean"] == 5
    assert hash_of(r, f"ql:s:wait:{DAY0}:q") == {"total": "1", "mean": "5", "vk": "0"}
