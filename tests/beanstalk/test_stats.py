"""The stats parser: beanstalkd's YAML-ish documents without a YAML library."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beanstalk_client._stats import (
    JOB_KEYS,
    SERVER_KEYS,
    TUBE_KEYS,
    format_dict,
    format_list,
    parse_job_stats,
    parse_list,
    parse_server_stats,
    parse_tube_stats,
)
from jobwire.errors import RemoteProtocolError
from tests.conftest import BEANSTALKD_TRANSCRIPT as TRANSCRIPT

with TRANSCRIPT.open(encoding="utf-8") as _f:
    EXCHANGES = [json.loads(line) for line in _f if line.strip()]


def ok_documents(index: int) -> list[bytes]:
    """The data of every ``OK <n>`` reply in one exchange's `recv`, sizes checked."""
    recv = EXCHANGES[index]["recv"].encode("latin-1")
    docs = []
    while recv:
        line, _, recv = recv.partition(b"\r\n")
        if line.startswith(b"OK "):
            size = int(line[3:])
            docs.append(recv[:size])
            assert recv[size : size + 2] == b"\r\n"
            recv = recv[size + 2 :]
    return docs


(STATS,) = ok_documents(33)
JOB_2, JOB_4 = ok_documents(10)
(JOB_5,) = ok_documents(11)[-1:]
(TUBE_T1,) = ok_documents(13)
(LIST_TUBES,) = ok_documents(14)
(LIST_WATCHED,) = ok_documents(8)


def test_server_stats_types() -> None:
    stats = parse_server_stats(STATS)
    assert tuple(stats) == SERVER_KEYS  # every 1.12 key, in the server's order
    assert stats["rusage-utime"] == 0.005051
    assert isinstance(stats["rusage-utime"], float)
    assert stats["rusage-stime"] == 0.0
    assert isinstance(stats["rusage-stime"], float)
    assert stats["version"] == "1.12"
    assert stats["os"] == "#1 SMP PREEMPT_DYNAMIC @0"
    assert stats["id"] == "00eef20ba8557bac"
    assert stats["hostname"] == "vm"
    assert stats["platform"] == "x86_64"
    assert stats["draining"] == "false"
    assert stats["pid"] == 23617
    assert stats["max-job-size"] == 1024
    assert stats["binlog-max-size"] == 10485760
    assert stats["cmd-reserve-with-timeout"] == 2
    strings = {"version", "os", "id", "hostname", "platform", "draining"}
    floats = {"rusage-utime", "rusage-stime"}
    for key, value in stats.items():
        if key in strings:
            assert type(value) is str, key
        elif key in floats:
            assert type(value) is float, key
        else:
            assert type(value) is int, key


def test_job_stats_types() -> None:
    job = parse_job_stats(JOB_2)
    assert tuple(job) == JOB_KEYS
    assert job == {
        "id": 2, "tube": "t-1", "state": "ready", "pri": 100, "age": 3, "delay": 0, "ttr": 60,
        "time-left": 0, "file": 0, "reserves": 0, "timeouts": 0, "releases": 0, "buries": 0,
        "kicks": 0,
    }
    assert type(job["id"]) is int  # stats-job id is a number; stats id is a string
    reserved = parse_job_stats(JOB_4)
    assert reserved["state"] == "reserved" and reserved["time-left"] == 59
    delayed = parse_job_stats(JOB_5)
    assert (delayed["state"], delayed["delay"], delayed["releases"]) == ("delayed", 3, 1)


def test_tube_stats_types() -> None:
    tube = parse_tube_stats(TUBE_T1)
    assert tuple(tube) == TUBE_KEYS
    assert tube["name"] == "t-1"
    assert tube["current-jobs-urgent"] == 3
    assert tube["total-jobs"] == 5
    assert all(type(v) is int for k, v in tube.items() if k != "name")


def test_lists() -> None:
    assert parse_list(LIST_TUBES) == ["default", "t-1"]
    assert parse_list(LIST_WATCHED) == ["t-1"]
    assert parse_list(b"---\n") == []


@pytest.mark.parametrize(
    "doc", [STATS, JOB_2, JOB_4, JOB_5, TUBE_T1], ids=["stats", "job2", "job4", "job5", "tube"]
)
def test_format_dict_round_trips_the_transcript(doc: bytes) -> None:
    parsers = {b"---\ncurrent-jobs-urgent": parse_server_stats, b"---\nid": parse_job_stats,
               b"---\nname": parse_tube_stats}
    (parse,) = [p for prefix, p in parsers.items() if doc.startswith(prefix)]
    assert format_dict(parse(doc)) == doc  # type: ignore[operator]


@pytest.mark.parametrize("doc", [LIST_TUBES, LIST_WATCHED, b"---\n"])
def test_format_list_round_trips_the_transcript(doc: bytes) -> None:
    assert format_list(parse_list(doc)) == doc


TRICKY_NAMES = ["1.10", "yes", "no", "010", "null", "~", "true", "1e3", "0x1F", ".inf", "1_000",
                "(x)", "$", "a-b", "on", "0"]


def test_tricky_tube_names_stay_strings_in_lists() -> None:
    doc = format_list(TRICKY_NAMES)
    assert doc.startswith(b"---\n- 1.10\n- yes\n")
    assert parse_list(doc) == TRICKY_NAMES
    assert all(type(name) is str for name in parse_list(doc))


@pytest.mark.parametrize("name", TRICKY_NAMES)
def test_tricky_tube_names_stay_strings_in_stats_tube(name: str) -> None:
    doc = TUBE_T1.replace(b"name: t-1\n", f"name: {name}\n".encode())
    tube = parse_tube_stats(doc)
    assert tube["name"] == name
    assert type(tube["name"]) is str
    assert format_dict(tube) == doc


@pytest.mark.parametrize("name", ["1.10", "010", "yes"])
def test_tricky_tube_names_stay_strings_in_stats_job(name: str) -> None:
    job = parse_job_stats(JOB_2.replace(b"tube: t-1\n", f"tube: {name}\n".encode()))
    assert job["tube"] == name


def test_quoted_values_of_1_13_are_unquoted() -> None:
    assert parse_list(b'---\n- "1.10"\n- "yes"\n') == ["1.10", "yes"]
    stats = parse_server_stats(b'---\nversion: "1.13"\nhostname: "vm"\nos: "#1 SMP"\npid: 7\n')
    assert stats == {"version": "1.13", "hostname": "vm", "os": "#1 SMP", "pid": 7}


def test_value_with_colon_space_and_hash_kept_whole() -> None:
    stats = parse_server_stats(b"---\nos: #1 SMP: Debian 6.1 # x\nhostname: a: b\n")
    assert stats["os"] == "#1 SMP: Debian 6.1 # x"
    assert stats["hostname"] == "a: b"


def test_unknown_keys_stay_strings() -> None:
    stats = parse_server_stats(b"---\npid: 5\nfuture-counter: 12\nfuture-time: 0.5\n")
    assert stats == {"pid": 5, "future-counter": "12", "future-time": "0.5"}  # type: ignore[comparison-overlap]
    job = parse_job_stats(b"---\nid: 1\nnew-key: 3\n")
    assert job["new-key"] == "3"  # type: ignore[typeddict-item]


def test_empty_value_of_a_string_key() -> None:
    assert parse_server_stats(b"---\nhostname: \n") == {"hostname": ""}
    assert parse_server_stats(b"---\nhostname:\n") == {"hostname": ""}


@pytest.mark.parametrize(
    "doc",
    [
        b"",  # no document at all
        b"id: 1\n",  # no '---'
        b"--\nid: 1\n",
        b" ---\nid: 1\n",
        b"---\nid 1\n",  # no 'key: value'
        b"---\nid=1\n",
        b"---\nid:1\n",
        b"---\nid: one\n",  # numeric key, not a number
        b"---\nid: \n",
        b"---\nid:\n",
        b"---\npri: 1.5\n",
        b"---\nid: 1\n\xff\xfe: 2\n",  # not UTF-8
        b"---\n- 1\n",  # a list where a dict belongs
    ],
)
def test_malformed_job_stats_raise(doc: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_job_stats(doc)


@pytest.mark.parametrize(
    "doc",
    [b"---\nrusage-utime: fast\n", b"---\npid: 1.0\n", b"---\nuptime: \n", b"stats\n"],
)
def test_malformed_server_stats_raise(doc: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_server_stats(doc)


@pytest.mark.parametrize("doc", [b"---\ntotal-jobs: many\n", b"---\npause: -\n"])
def test_malformed_tube_stats_raise(doc: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_tube_stats(doc)


@pytest.mark.parametrize(
    "doc", [b"", b"- a\n", b"---\na\n", b"---\n-a\n", b"---\nname: a\n", b"---\n- a\n\xff\n"]
)
def test_malformed_lists_raise(doc: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_list(doc)


@pytest.mark.parametrize(
    "doc",
    [b"---\nid: 1_0\n", b"---\npri: +5\n", b"---\nage:  3\n"],
)
def test_non_canonical_numbers_raise(doc: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_job_stats(doc)


_tubes = st.from_regex(r"[A-Za-z0-9+/;.$_()][A-Za-z0-9\-+/;.$_()]{0,30}", fullmatch=True)


@given(st.lists(_tubes, max_size=20))
def test_list_round_trip(names: list[str]) -> None:
    assert parse_list(format_list(names)) == names


@given(
    name=_tubes,
    numbers=st.lists(st.integers(0, 2**64 - 1), min_size=len(TUBE_KEYS) - 1,
                     max_size=len(TUBE_KEYS) - 1),
)
def test_tube_stats_round_trip(name: str, numbers: list[int]) -> None:
    values = {"name": name, **dict(zip(TUBE_KEYS[1:], numbers, strict=True))}
    doc = format_dict(values)
    assert parse_tube_stats(doc) == values
    assert format_dict(parse_tube_stats(doc)) == doc
