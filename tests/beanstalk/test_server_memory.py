"""The bundled beanstalk server's ``max_memory`` (``--max-memory``): a test server that refuses
jobs with ``OUT_OF_MEMORY`` once its stored jobs take the limit, and takes them again once
deletes free room. beanstalkd has no such limit; the default (none) is the bundled server's too.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from beanstalk_client import Client, OutOfMemory
from beanstalk_client.server import Server, run_server
from beanstalk_client.server._state import JOB_OVERHEAD

from ..conftest import start_server

LIMIT = 64 * 1024
BODY = b"x" * 1000
#: Jobs of BODY that fit in LIMIT.
FIT = LIMIT // (len(BODY) + JOB_OVERHEAD)


def stored(server: Server) -> int:
    """The bytes the server's stored jobs count (read on the server's thread)."""
    return server.call(lambda: server.state.memory)


def fill(client: Client[bytes]) -> list[int]:
    """Put BODY until the server answers OUT_OF_MEMORY; return the ids stored."""
    ids: list[int] = []
    with pytest.raises(OutOfMemory):
        for _ in range(2 * FIT):
            ids.append(client.put(BODY))
    return ids


def test_puts_are_refused_at_the_limit_until_deletes_free_room() -> None:
    with run_server(max_memory=LIMIT) as server, Client(server.url, timeout=10) as client:
        ids = fill(client)
        assert len(ids) == FIT
        assert stored(server) == FIT * (len(BODY) + JOB_OVERHEAD) <= LIMIT
        assert client.list_tube_used() == "default"  # the connection stays usable
        room = LIMIT - stored(server) - JOB_OVERHEAD  # the largest body that still fits
        with pytest.raises(OutOfMemory):
            client.put(b"z" * (room + 1))
        ids.append(client.put(b"z" * room))  # the limit itself is allowed
        assert stored(server) == LIMIT
        with pytest.raises(OutOfMemory):
            client.put(b"")
        stats = client.stats()
        assert stats["current-jobs-ready"] == FIT + 1
        assert stats["total-jobs"] == FIT + 1
        assert stats["cmd-put"] == FIT + 4  # refused puts count, as beanstalkd counts them

        job = client.reserve(0)  # released, buried and kicked jobs are still stored
        client.bury(job)
        client.kick(1)
        with pytest.raises(OutOfMemory):
            client.put(BODY)

        client.delete(ids[0])
        # A refused put used up no id: the next one is the one after the last stored.
        assert client.put(BODY) == ids[-1] + 1
        with pytest.raises(OutOfMemory):
            client.put(BODY)
        job = client.reserve(0)  # a worker's delete frees room as well
        client.delete(job)
        assert client.put(BODY) == ids[-1] + 2


def test_a_job_larger_than_the_limit_is_refused_on_an_empty_server() -> None:
    with run_server(max_memory=1024) as server, Client(server.url, timeout=10) as client:
        with pytest.raises(OutOfMemory):
            client.put(b"y" * 1024)
        assert client.put(b"y" * (1024 - JOB_OVERHEAD)) == 1
        assert client.stats()["total-jobs"] == 1


def test_no_limit_by_default() -> None:
    with run_server() as server:
        assert server.state.max_memory is None
    with pytest.raises(ValueError), run_server(max_memory=0):
        pass


def test_max_memory_flag() -> None:
    server = start_server("bundled", args=["--max-memory", "64k"])
    try:
        with Client(f"beanstalk://{server.host}:{server.port}", timeout=10) as client:
            ids = fill(client)
            assert len(ids) == FIT
            client.delete(ids[-1])
            client.put(BODY)
    finally:
        server.stop()


@pytest.mark.parametrize("value", ["0", "12x", "-1", "1.5M", ""])
def test_max_memory_flag_needs_a_size(value: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beanstalk_client.server", "-p", "0", "--max-memory", value],
        capture_output=True, timeout=30,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"argument --max-memory: invalid size value" in proc.stderr
