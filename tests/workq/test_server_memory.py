"""The bundled Workq server's ``max_memory`` (``--max-memory``): a test server that refuses
``add``, ``schedule`` and ``run`` with Workq's own reply for a job it cannot store
(``-SERVER-ERROR Unable to add job`` ...) once its stored jobs take the limit, and takes them
again once deletes, TTL evictions or answered runs free room. The Go server has no such limit;
the default (none) is the bundled server's too.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from workq_client import Client
from workq_client.errors import DuplicateJob, ServerError, TimedOut
from workq_client.server import Server, run_server
from workq_client.server._state import JOB_OVERHEAD

from ..waiting import wait_until
from .conftest import start_workq_server

LIMIT = 64 * 1024
NAME = "q"
BODY = b"x" * 1000
#: What one job of BODY under NAME counts.
SIZE = JOB_OVERHEAD + len(NAME) + len(BODY)
#: Jobs of BODY that fit in LIMIT.
FIT = LIMIT // SIZE


def stored(server: Server) -> int:
    """The bytes the server's stored jobs count (read on the server's thread)."""
    return server.call(lambda: server.state.memory)


def fill(client: Client[bytes], ttl: float = 3600) -> list[str]:
    """Add BODY until the server refuses it; return the ids stored."""
    ids: list[str] = []
    with pytest.raises(ServerError) as refused:
        for _ in range(2 * FIT):
            ids.append(client.add(NAME, BODY, ttl=ttl))
    assert refused.value.text == "Unable to add job"
    return ids


def test_adds_are_refused_at_the_limit_until_deletes_free_room() -> None:
    with run_server(max_memory=LIMIT) as server, Client(server.url, timeout=10) as client:
        ids = fill(client)
        assert len(ids) == FIT
        assert stored(server) == FIT * SIZE <= LIMIT
        assert client.inspect_queue(NAME).ready_len == FIT  # the connection stays usable
        with pytest.raises(ServerError, match=r"^SERVER-ERROR Unable to schedule job$"):
            client.schedule(NAME, BODY, time.time() + 3600)
        with pytest.raises(ServerError, match=r"^SERVER-ERROR Unable to run$"):
            client.run(NAME, BODY, wait=5)
        with pytest.raises(DuplicateJob):  # Workq checks the id first
            client.add(NAME, BODY, job_id=ids[0])

        # A result is counted but never refused: it finishes the job.
        job = client.lease(NAME, wait=0)
        client.complete(job.job_id, b"r" * 500)
        assert stored(server) == FIT * SIZE + 500

        client.delete(job.job_id)  # its payload and its result come back
        assert stored(server) == (FIT - 1) * SIZE
        new = client.add(NAME, BODY)
        with pytest.raises(ServerError, match="Unable to add job"):
            client.add(NAME, BODY)
        client.delete(new)
        assert client.inspect_job(client.add(NAME, BODY)).payload == BODY


def test_evicted_jobs_and_answered_runs_free_room() -> None:
    with run_server(max_memory=LIMIT) as server, Client(server.url, timeout=10) as client:
        with pytest.raises(TimedOut):
            client.run(NAME, BODY, wait=0.01)  # nobody leases it: it is gone when answered
        assert stored(server) == 0
        ids = fill(client, ttl=1)
        assert wait_until(lambda: client.inspect_server().evicted_jobs == len(ids))
        assert stored(server) == 0
        client.add(NAME, BODY)


def test_no_limit_by_default() -> None:
    with run_server() as server:
        assert server.state.max_memory is None
    with pytest.raises(ValueError), run_server(max_memory=0):
        pass


@pytest.mark.parametrize("flag", ["--max-memory", "-max-memory"])
def test_max_memory_flag(flag: str) -> None:
    server = start_workq_server(args=[flag, "64k"])
    try:
        with Client(server.host, server.port, timeout=10) as client:
            ids = fill(client)
            assert len(ids) == FIT
            client.delete(ids[-1])
            client.add(NAME, BODY)
    finally:
        server.stop()


@pytest.mark.parametrize("value", ["0", "12x", "-1", "1.5M", ""])
def test_max_memory_flag_needs_a_size(value: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "workq_client.server", "-listen", "127.0.0.1:0",
         "--max-memory", value],
        capture_output=True, timeout=30,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"argument --max-memory/-max-memory: invalid size value" in proc.stderr
