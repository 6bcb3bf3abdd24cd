"""``jobwire.serializers``: the serializers themselves, their errors, and that a type checker sees
the body type of each client (mypy strict on a snippet that uses all four)."""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from jobwire.errors import JobwireError, LocalProtocolError
from jobwire.serializers import (
    JSON,
    RAW,
    TEXT,
    DeserializationError,
    Json,
    SerializationError,
    Text,
    dump,
    dump_all,
    load,
)
from jobwire.testing import unavailable

ROOT = Path(__file__).resolve().parents[1]


def test_raw_is_bytes_both_ways() -> None:
    assert dump(RAW, b"\x00\xff") == b"\x00\xff"
    assert dump(RAW, bytearray(b"ab")) == b"ab"  # type: ignore[arg-type]
    assert dump(RAW, memoryview(b"cd")) == b"cd"  # type: ignore[arg-type]
    assert load(RAW, b"\xff", 1) == b"\xff"
    with pytest.raises(SerializationError, match=r"bytes, not str \(pass serializer=TEXT"):
        dump(RAW, "text")  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match="bytes, not int"):
        dump(RAW, 5)  # type: ignore[arg-type]


def test_text_encodes_and_decodes() -> None:
    assert dump(TEXT, "héllo") == "héllo".encode()
    assert load(TEXT, "héllo".encode()) == "héllo"
    latin = Text("latin-1")
    assert dump(latin, "é") == b"\xe9"
    assert load(latin, b"\xe9") == "é"
    with pytest.raises(SerializationError, match="'latin-1' codec can't encode") as info:
        dump(latin, "€")
    assert isinstance(info.value.__cause__, UnicodeEncodeError)
    with pytest.raises(SerializationError, match="body is str, not bytes"):
        dump(TEXT, b"bytes")  # type: ignore[arg-type]
    with pytest.raises(SerializationError):
        dump(TEXT, "\ud800")  # a lone surrogate has no UTF-8
    assert Text(errors="surrogateescape").loads(b"\xff") == "\udcff"
    with pytest.raises(LookupError):
        Text("no-such-codec")
    with pytest.raises(LookupError):
        Text(errors="no-such-handler")
    assert (repr(TEXT), repr(latin), repr(Text("utf-8", "replace"))) == (
        "TEXT", "Text('iso8859-1')", "Text('utf-8', 'replace')")


def test_json_is_compact_and_strict() -> None:
    assert dump(JSON, {"a": [1, 2.5, None, True], "é": "x"}) == (
        b'{"a":[1,2.5,null,true],"\\u00e9":"x"}')
    assert load(JSON, b'{"a":[1]}') == {"a": [1]}
    for bad in (math.nan, math.inf, {1, 2}, object(), datetime(2024, 1, 1)):
        with pytest.raises(SerializationError):
            dump(JSON, bad)
    when = Json(default=lambda value: value.isoformat(), ensure_ascii=False, sort_keys=True)
    assert dump(when, {"b": datetime(2024, 1, 1), "a": "é"}) == (
        '{"a":"é","b":"2024-01-01T00:00:00"}'.encode())


def test_errors_are_typed_and_carry_the_job() -> None:
    with pytest.raises(DeserializationError) as info:
        load(TEXT, b"\xff\xfe", job_id=42)
    error = info.value
    assert isinstance(error, JobwireError) and isinstance(error, ValueError)
    assert not isinstance(error, LocalProtocolError)
    assert (error.data, error.job_id) == (b"\xff\xfe", 42)
    assert "job 42" in str(error) and "TEXT" in str(error)
    with pytest.raises(DeserializationError) as info:
        load(JSON, b"{not json", job_id="jid-1", what="data")
    assert info.value.job_id == "jid-1" and info.value.data == b"{not json"
    assert issubclass(SerializationError, LocalProtocolError)


def test_bulk_dumps_name_the_bad_index() -> None:
    assert dump_all(RAW, [b"a", bytearray(b"b")]) == [b"a", b"b"]  # type: ignore[list-item]
    with pytest.raises(SerializationError, match="body 2 cannot"):
        dump_all(RAW, [b"a", b"b", "c"])  # type: ignore[list-item]
    with pytest.raises(SerializationError, match="payload 1 cannot"):
        dump_all(TEXT, ["a", 1], "payload")  # type: ignore[list-item]


class _Broken:
    def dumps(self, value: object, /) -> bytes:
        return "not bytes"  # type: ignore[return-value]

    def loads(self, data: bytes, /) -> object:
        raise KeyError("nope")


def test_a_serializer_of_your_own_that_misbehaves() -> None:
    with pytest.raises(SerializationError, match="returned str, not bytes"):
        dump(_Broken(), 1)
    with pytest.raises(DeserializationError) as info:
        load(_Broken(), b"x", b"H:vm:1")
    assert isinstance(info.value.__cause__, KeyError) and info.value.job_id == b"H:vm:1"


SNIPPET = '''
from __future__ import annotations

from typing import Any
from typing_extensions import assert_type

import beanstalk_client, gearman_client, qless_client, workq_client
from beanstalk_client import Job
from jobwire.serializers import JSON, TEXT, Text
from workq_client import JobResultRecord, LeasedJob


def beanstalk() -> None:
    raw = beanstalk_client.Client()
    assert_type(raw, beanstalk_client.Client[bytes])
    assert_type(raw.reserve(wait=1), Job[bytes])
    text = beanstalk_client.Client(serializer=TEXT)
    assert_type(text.reserve().body, str)
    text.put("str")
    text.put(b"bytes")  # E: arg-type
    raw.put("str")  # E: arg-type
    assert_type(beanstalk_client.Client.from_url("u", serializer=JSON).peek(1).body, Any)


async def beanstalk_async() -> None:
    client = beanstalk_client.AsyncClient(serializer=Text("latin-1"))
    assert_type((await client.reserve()).body, str)
    assert_type(await client.put_many(["a", "b"]), list[int])


def gearman() -> None:
    assert_type(gearman_client.Client().submit("f", b"x"), bytes)
    client = gearman_client.Client(serializer=TEXT)
    assert_type(client.submit("f", "x"), str)
    assert_type(client.submit_many([("f", "x")]), list[str])
    assert_type(client.submit_background("f", "x"), bytes)
    assert_type(client.submit_reduce("f", "x", reducer="r"), str)
    assert_type(client.submit_reduce("f", "x", reducer="r", background=True), bytes)
    client.submit("f", 1)  # E: arg-type


async def gearman_async() -> None:
    client = gearman_client.AsyncClient(serializer=JSON)
    job = await client.start("f", {"a": 1})
    assert_type(await job.result(), Any)


def workq() -> None:
    client = workq_client.Client(serializer=TEXT)
    assert_type(client.lease("q"), LeasedJob[str])
    assert_type(client.result("id"), JobResultRecord[str])
    client.complete("id", "done")
    assert_type(workq_client.Client().lease("q").payload, bytes)


def qless() -> None:
    client = qless_client.Client()
    assert_type(client.queue("q").pop(2)[0].data, Any)
    typed = qless_client.Client(serializer=Text())
    assert_type(typed.queue("q").pop(2)[0].data, str)
    typed.queue("q").put("k", "text")
    typed.queue("q").put("k", 1)  # E: arg-type
'''


def mypy_errors(source: str, tmp_path: Path) -> tuple[dict[int, str], str]:
    """Run ``mypy --strict`` on ``source``: the error codes of each line with an error, and
    mypy's output. Skipped when mypy is not installed (failed under
    JOBWIRE_REQUIRE_REAL_SERVERS=1, as CI runs: there a missing mypy is a broken setup)."""
    if importlib.util.find_spec("mypy") is None:
        unavailable("mypy is not installed (pip install -e '.[test]')")
    path = tmp_path / "uses.py"
    path.write_text(source)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--python-version",
         "3.10", "--cache-dir", str(tmp_path / "cache"), str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    found: dict[int, list[str]] = {}
    for line in out.stdout.splitlines():
        match = re.match(rf"{re.escape(str(path))}:(\d+): error: .*\[([\w-]+)\]$", line)
        if match:
            found.setdefault(int(match.group(1)), []).append(match.group(2))
    assert out.returncode in (0, 1), out.stdout + out.stderr  # 2: mypy itself failed
    return {n: ", ".join(sorted(codes)) for n, codes in found.items()}, out.stdout


def expected_errors(source: str) -> dict[int, str]:
    """The line and error codes of each ``# E: code[, code]`` comment in ``source``."""
    return {n: line.partition("# E: ")[2].strip()
            for n, line in enumerate(source.splitlines(), 1) if "# E: " in line}


@pytest.mark.slow
def test_mypy_sees_each_clients_body_type(tmp_path: Path) -> None:
    source = textwrap.dedent(SNIPPET)
    found, out = mypy_errors(source, tmp_path)
    assert found == expected_errors(source), out


HANDLERS_AND_WITH = '''
from __future__ import annotations

from typing_extensions import assert_type

import beanstalk_client, gearman_client, qless_client, workq_client
from gearman_client import AsyncJob, AsyncWorker, Job, Worker


def handlers() -> None:
    worker = Worker()
    worker.register("f", lambda job: job.data[::-1])
    worker.register("f", lambda job: job.data.decode())
    worker.register("f", lambda job: None)
    worker.register("f", lambda job: 123)  # E: arg-type, return-value

    def counts(job: Job) -> int:
        return len(job.data)

    worker.register("f", counts)  # E: arg-type


async def async_handlers() -> None:
    async def upper(job: AsyncJob) -> bytes:
        return job.data.upper()

    async def counts(job: AsyncJob) -> int:
        return len(job.data)

    worker = AsyncWorker()
    worker.register("f", upper)
    worker.register("f", counts)  # E: arg-type


class MyGearman(gearman_client.AsyncClient[bytes]):
    pass


async def entered() -> None:
    # What `async with` / `with` gives is the class itself, subclasses and the public
    # subclasses of the shared code included.
    async with gearman_client.AsyncClient() as g:
        assert_type(g, gearman_client.AsyncClient[bytes])
    async with MyGearman() as mine:
        assert_type(mine, MyGearman)
    async with gearman_client.AsyncAdmin() as admin:
        assert_type(admin, gearman_client.AsyncAdmin)
    with gearman_client.Client() as sg, gearman_client.Admin() as sadmin:
        assert_type(sg, gearman_client.Client[bytes])
        assert_type(sadmin, gearman_client.Admin)
    async with beanstalk_client.AsyncClient() as b, beanstalk_client.AsyncWorker("u") as bw:
        assert_type(b, beanstalk_client.AsyncClient[bytes])
        assert_type(bw, beanstalk_client.AsyncWorker)
    with beanstalk_client.Client() as sb:
        assert_type(sb, beanstalk_client.Client[bytes])
    async with workq_client.AsyncClient() as w, workq_client.AsyncWorker("u", "q") as ww:
        assert_type(w, workq_client.AsyncClient[bytes])
        assert_type(ww, workq_client.AsyncWorker)
    with workq_client.Client() as sw:
        assert_type(sw, workq_client.Client[bytes])
    async with qless_client.AsyncClient() as q, qless_client.AsyncWorker(queues=["q"]) as qw:
        assert_type(q, qless_client.AsyncClient)
        assert_type(qw, qless_client.AsyncWorker)
    with qless_client.Client() as sq:
        assert_type(sq, qless_client.Client)
'''


@pytest.mark.slow
def test_mypy_sees_what_a_gearman_handler_returns_and_what_with_gives(tmp_path: Path) -> None:
    """A Gearman handler must return bytes, str or None (anything else fails its job at run
    time), for Worker as for AsyncWorker; ``with``/``async with`` gives the client's own
    class (``Self``), so a subclass stays itself."""
    source = textwrap.dedent(HANDLERS_AND_WITH)
    found, out = mypy_errors(source, tmp_path)
    assert found == expected_errors(source), out
