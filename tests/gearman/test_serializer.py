"""``serializer=`` on the Gearman clients, against the bundled server and the real gearmand, with
libgearman's own ``gearman -w`` as the worker (``cat``: the result is the data as sent): ``str``
and JSON data and results, data the serializer cannot write refused at the call with nothing
sent, and a result it cannot read reported with the job's handle."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from gearman_client import Admin, AsyncClient, Client
from jobwire.serializers import JSON, TEXT, DeserializationError, SerializationError, Text

from .conftest import GearmanServer, need


def _worker(server: GearmanServer, function: str, *command: str) -> subprocess.Popen[bytes]:
    tool = need(shutil.which("gearman"), "gearman (gearman-tools)")
    return subprocess.Popen(
        [tool, "-h", "127.0.0.1", "-p", str(server.port), "-w", "-f", function, "--", *command],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


@pytest.fixture
def echo(gearman_server: GearmanServer, function: str) -> Iterator[str]:
    """``function`` answered by a ``gearman -w ... -- cat`` worker."""
    proc = _worker(gearman_server, function, "cat")
    yield function
    proc.terminate()
    proc.wait(5)


def _queued(server: GearmanServer, function: str) -> int:
    with Admin(server.url) as admin:
        return sum(row.queued for row in admin.status() if row.function == function)


def test_str_data_and_results(gearman_server: GearmanServer, echo: str) -> None:
    with Client(gearman_server.url, serializer=TEXT, timeout=20) as client:
        assert client.submit(echo, "héllo wörld") == "héllo wörld"
        assert client.submit(echo) == ""  # no data: empty
        assert client.submit_many([(echo, "a"), (echo, "é")], window=2) == ["a", "é"]
        handle = client.submit_background(echo, "in the background")
        assert isinstance(handle, bytes)
    with Client(gearman_server.url, timeout=20) as raw:  # on the wire: UTF-8
        assert raw.submit(echo, "é".encode()) == b"\xc3\xa9"


def test_json_data_and_results(gearman_server: GearmanServer, echo: str) -> None:
    with Client(gearman_server.url, serializer=JSON, timeout=20) as client:
        assert client.submit(echo, {"size": [640, 480], "name": "é"}) == {
            "size": [640, 480], "name": "é"}
        assert client.submit_many([(echo, [1]), (echo, "x")]) == [[1], "x"]


def test_what_the_serializer_cannot_write_is_refused_before_anything_is_sent(
    gearman_server: GearmanServer, function: str
) -> None:
    with Client(gearman_server.url, timeout=20) as raw:
        with pytest.raises(SerializationError, match="pass serializer=TEXT"):
            raw.submit_background(function, "a str to a bytes client")  # type: ignore[arg-type]
        with pytest.raises(SerializationError, match="the data of job 1 cannot"):
            raw.submit_background_many(
                [(function, b"ok"), (function, 7), (function, b"ok")]  # type: ignore[list-item]
            )
        assert raw.echo(b"usable") == b"usable"
    with Client(gearman_server.url, serializer=Text("ascii"), timeout=20) as ascii_client:
        with pytest.raises(SerializationError, match="'ascii' codec can't encode"):
            ascii_client.submit_background(function, "é")
        with pytest.raises(SerializationError):
            ascii_client.submit_many([(function, "é")])
    with Client(gearman_server.url, serializer=JSON, timeout=20) as json_client, \
            pytest.raises(SerializationError):
        json_client.submit_background(function, {1, 2})
    assert _queued(gearman_server, function) == 0


def test_a_result_the_serializer_cannot_read_names_the_job(
    gearman_server: GearmanServer, function: str
) -> None:
    proc = _worker(gearman_server, function, "sh", "-c", "cat >/dev/null; printf '\\377'")
    try:
        with Client(gearman_server.url, serializer=TEXT, timeout=20) as client:
            with pytest.raises(DeserializationError) as info:
                client.submit(function, "x")
            assert info.value.data == b"\xff"
            assert isinstance(info.value.job_id, bytes) and info.value.job_id.startswith(b"H:")
            results = None
            try:
                client.submit_many([(function, "a"), (function, "b")])
            except Exception as exc:  # BulkSubmitError
                results = exc.results  # type: ignore[attr-defined]
            assert results is not None
            assert all(isinstance(r, DeserializationError) for r in results)
            assert client.echo(b"still usable") == b"still usable"
    finally:
        proc.terminate()
        proc.wait(5)


@pytest.mark.anyio
async def test_the_async_client(gearman_server: GearmanServer, echo: str) -> None:
    async with AsyncClient(gearman_server.url, serializer=TEXT, timeout=20) as client:
        assert await client.submit(echo, "ä") == "ä"
        job = await client.start(echo, "ö")
        assert await job.result() == "ö"
        with pytest.raises(SerializationError):
            await client.start(echo, b"bytes")  # type: ignore[arg-type]
