"""The admin protocol and the job list as gearmand 1.1.20 really shows them, on both servers:
``create function`` names, ``workers`` lines with foreign client ids, ``cancel job``, the
``show jobs`` columns, ``drop function`` refusals and 64-byte unique ids. Where the bundled
server matches gearmand, one assertion holds for both; where it does not on purpose
(docs/gearman.md), each server's own behaviour is asserted."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gearman_client import Admin, Client, ServerError
from gearman_client import _packets as pk
from gearman_client._events import NEED_DATA
from gearman_client._protocol import Connection

from ..waiting import wait_until
from .conftest import GearmanServer, need


def gearadmin(server: GearmanServer, *args: str) -> subprocess.CompletedProcess[bytes]:
    tool = need(shutil.which("gearadmin"), "gearadmin (gearman-tools)")
    return subprocess.run([tool, "-h", server.host, "-p", str(server.port), *args],
                          capture_output=True, timeout=20, check=False)


class Raw:
    """A raw connection: packets go out unvalidated (foreign peers send ids and uniques our own
    classes refuse) and come back decoded, one at a time, in the order the server sent them."""

    def __init__(self, server: GearmanServer) -> None:
        self.sock = socket.create_connection(server.address, timeout=5)
        self.decoder = pk.PacketDecoder(pk.RES)
        self.events: list[pk.Packet] = []

    def send(self, *packets: pk.Packet) -> None:
        self.sock.sendall(b"".join(pk.encode_packet(p, pk.REQ) for p in packets))

    def request(self, packet: pk.Packet) -> Any:
        """Send ``packet`` and return the next packet from the server."""
        self.send(packet)
        return self.until(lambda e: True)

    def sync(self) -> None:
        """An ECHO round trip: every packet sent before it has been handled."""
        self.send(pk.EchoReq(b"sync"))
        self.until(lambda e: e == pk.EchoRes(b"sync"))

    def until(self, match: Any) -> Any:
        """The first packet (received or buffered) that ``match``es; earlier ones are kept."""
        deadline = time.monotonic() + 5
        while True:
            for i, event in enumerate(self.events):
                if match(event):
                    del self.events[i]
                    return event
            assert time.monotonic() < deadline, self.events
            self.decoder.feed(self.sock.recv(65536))
            while (packet := self.decoder.next_packet()) is not None:
                self.events.append(packet)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(fresh_gearman: GearmanServer) -> Iterator[Any]:
    opened: list[Raw] = []

    def open_() -> Raw:
        opened.append(Raw(fresh_gearman))
        return opened[-1]

    yield open_
    for one in opened:
        one.close()


def test_created_function_keeps_its_full_name(fresh_gearman: GearmanServer, function: str) -> None:
    with Admin(fresh_gearman.url) as admin:
        admin.create_function(function)
        names = [s.function for s in admin.status()]
        assert function in names and function[:-1] not in names
        listed = gearadmin(fresh_gearman, "--status")
        assert listed.returncode == 0
        assert f"{function}\t0\t0\t0".encode() in listed.stdout.splitlines()
        admin.drop_function(function)
        assert function not in [s.function for s in admin.status()]


def test_admin_lines_end_in_crlf_or_lf(fresh_gearman: GearmanServer, function: str) -> None:
    """gearadmin ends lines in CRLF; with a bare LF gearmand 1.1.20 stores ``create function
    F`` as F without its last character. The bundled server reads both the same."""
    with socket.create_connection(fresh_gearman.address, timeout=5) as sock:
        sock.sendall(f"create function {function}-crlf\r\ncreate function {function}-lf\n"
                     .encode())
        got = b""
        while got.count(b"\n") < 2:
            got += sock.recv(100)
        assert got == b"OK\r\nOK\r\n"
    with Admin(fresh_gearman.url) as admin:
        names = {s.function for s in admin.status()}
    lf = f"{function}-l" if fresh_gearman.kind == "gearmand" else f"{function}-lf"
    assert names == {f"{function}-crlf", lf}


#: Client ids as foreign workers send them (gear, raw sockets), and how ``workers`` shows them.
CLIENT_IDS = [b"my worker", b"", b"a:b", b"a : b", b"x :", b" : ", b"tab\there", b"ctl\x01x",
              b"cr\rx", b"-"]


def test_workers_lists_foreign_client_ids_as_sent(
    fresh_gearman: GearmanServer, function: str, raw: Any
) -> None:
    expected: dict[str, tuple[str, tuple[str, ...]]] = {}
    for i, client_id in enumerate(CLIENT_IDS):
        worker = raw()
        first, second = f"{function}-{i}a", f"{function}-{i}b"
        worker.send(pk.SetClientId(client_id), pk.CanDo(first.encode()),
                    pk.CanDo(second.encode()))
        worker.sync()
        # gearmand lists a worker's functions newest first
        expected[first] = (client_id.decode(), (second, first))
    anonymous = raw()
    anonymous.send(pk.CanDo(f"{function}-anon".encode()))
    anonymous.sync()
    expected[f"{function}-anon"] = ("-", (f"{function}-anon",))
    with Admin(fresh_gearman.url) as admin:
        workers = admin.workers()
    seen = {w.functions[-1]: (w.client_id, w.functions) for w in workers if w.functions}
    assert seen == expected
    assert all(w.address == "127.0.0.1" for w in workers)


def test_workers_with_a_newline_in_a_client_id(
    fresh_gearman: GearmanServer, function: str, raw: Any
) -> None:
    """gearmand prints the id verbatim, breaking the entry over two lines: the parser joins it
    back. The bundled server writes the newline as ``?`` (docs/gearman.md)."""
    worker = raw()
    worker.send(pk.SetClientId(b"nl\nx"), pk.CanDo(function.encode()))
    worker.sync()
    with Admin(fresh_gearman.url) as admin:
        [mine] = [w for w in admin.workers() if w.functions == (function,)]
    assert mine.client_id == ("nl\nx" if fresh_gearman.kind == "gearmand" else "nl?x")


def test_cancel_job_marks_the_job_and_fails_its_clients(
    fresh_gearman: GearmanServer, function: str, raw: Any
) -> None:
    fn = function.encode()
    first, second, third = raw(), raw(), raw()
    background = first.request(pk.SubmitJobBg(fn, b"u-bg", b"bg")).handle
    foreground = first.request(pk.SubmitJob(fn, b"u-fg", b"fg")).handle
    assert second.request(pk.SubmitJob(fn, b"u-fg", b"fg")).handle == foreground  # coalesced
    running = third.request(pk.SubmitJob(fn, b"", b"run")).handle
    with Admin(fresh_gearman.url) as admin:
        admin.cancel_job(background)
        admin.cancel_job(foreground)
        # every client waiting for the cancelled job gets WORK_FAIL
        assert first.until(lambda e: isinstance(e, pk.WorkFail)) == pk.WorkFail(foreground)
        assert second.until(lambda e: isinstance(e, pk.WorkFail)) == pk.WorkFail(foreground)
        # the jobs stay, marked ignored, and are still counted and known ...
        jobs = {j.handle: j for j in admin.show_jobs()}
        assert (jobs[background].ignore_job, jobs[background].queued) == (True, False)
        assert (jobs[foreground].ignore_job, jobs[foreground].queued) == (True, False)
        assert (jobs[running].ignore_job, jobs[running].queued) == (False, False)
        [row] = [s for s in admin.status() if s.function == function]
        assert (row.queued, row.running) == (3, 0)
        assert first.request(pk.GetStatus(background)) == pk.StatusRes(
            background, True, False, 0, 0)
        # ... until a worker's grab drops them: it gets the next job
        worker = raw()
        worker.send(pk.CanDo(fn))
        assigned = worker.request(pk.GrabJobUniq())
        assert isinstance(assigned, pk.JobAssignUniq) and assigned.handle == running
        assert [j.handle for j in admin.show_jobs()] == [running]
        assert not first.request(pk.GetStatus(background)).known
        # a running job can be cancelled too: its client is failed at once, the worker goes on
        admin.cancel_job(running)
        assert third.until(lambda e: isinstance(e, pk.WorkFail)) == pk.WorkFail(running)
        [job] = admin.show_jobs()
        assert (job.handle, job.ignore_job) == (running, True)
        worker.send(pk.WorkComplete(running, b"late"))
        worker.sync()
        assert worker.events == []  # accepted: no ERROR JOB_NOT_FOUND
        assert admin.show_jobs() == []
        with pytest.raises(ServerError) as info:
            admin.cancel_job("H:nope:1")
        assert info.value.code == "UNKNOWN_JOB"


def test_show_jobs_columns_of_requeued_jobs(
    fresh_gearman: GearmanServer, function: str, raw: Any
) -> None:
    """``retries`` counts how often a job went back to the queue after its worker left;
    ``queued`` (gearmand's ``job_queued``) is set for background jobs, never for foreground
    ones, whether they run, wait or were requeued."""
    fn = function.encode()
    client = raw()
    background = client.request(pk.SubmitJobBg(fn, b"", b"bg")).handle
    foreground = client.request(pk.SubmitJob(fn, b"", b"fg")).handle
    with Admin(fresh_gearman.url) as admin:

        def columns() -> dict[bytes, tuple[int, bool, bool]]:
            return {j.handle: (j.retries, j.ignore_job, j.queued) for j in admin.show_jobs()}

        assert columns() == {background: (0, False, True), foreground: (0, False, False)}
        for attempt in (1, 2):
            worker = raw()
            worker.send(pk.CanDo(fn))
            worker.request(pk.GrabJobUniq())
            worker.request(pk.GrabJobUniq())
            assert columns() == {background: (attempt - 1, False, True),
                                 foreground: (attempt - 1, False, False)}
            worker.close()
            wait_until(lambda: columns()[foreground][0] == attempt,  # noqa: B023 (called here)
                       what="the foreground job's attempt in the listing")
            assert columns() == {background: (attempt, False, True),
                                 foreground: (attempt, False, False)}


def test_drop_function_refused_while_workers_are_connected(
    fresh_gearman: GearmanServer, function: str, raw: Any
) -> None:
    worker = raw()
    worker.send(pk.CanDo(function.encode()))
    worker.sync()
    with Admin(fresh_gearman.url) as admin:
        with pytest.raises(ServerError) as info:
            admin.drop_function(function)
        assert (info.value.code, info.value.text) == (
            "", "there are still connected workers or executing clients")
        assert str(info.value) == "there are still connected workers or executing clients"
    printed = gearadmin(fresh_gearman, "--drop-function", function)
    # gearadmin prints what follows "ERR ", the CR of the CRLF included, for gearmand too
    assert printed.stderr == b"Error: there are still connected workers or executing clients\r\n"
    with Admin(fresh_gearman.url) as admin:
        with pytest.raises(ServerError) as info:
            admin.drop_function(f"{function}-unknown")
        assert (info.value.code, info.value.text) == ("", "function not found")


def test_drop_function_with_queued_jobs(fresh_gearman: GearmanServer, function: str) -> None:
    """gearmand drops the function and orphans its jobs (a new worker of the function never
    gets them); the bundled server refuses (docs/gearman.md)."""
    with Client(fresh_gearman.url) as client, Admin(fresh_gearman.url) as admin:
        handle = client.submit_background(function, b"x")
        if fresh_gearman.kind == "gearmand":
            admin.drop_function(function)
            assert handle in [j.handle for j in admin.show_jobs()]
            with socket.create_connection(fresh_gearman.address, timeout=5) as sock:
                conn = Connection()
                sock.sendall(conn.send(pk.CanDo(function.encode())) + conn.send(pk.GrabJobUniq()))
                events: list[Any] = []
                while not events:
                    conn.receive_data(sock.recv(1000))
                    while (event := conn.next_event()) is not NEED_DATA:
                        events.append(event)
            assert events[0].reply == pk.NoJob()
        else:
            with pytest.raises(ServerError) as info:
                admin.drop_function(function)
            assert (info.value.code, info.value.text) == (
                "", "there are still queued or running jobs")
            assert function in [s.function for s in admin.status()]


def test_unique_of_64_bytes(fresh_gearman: GearmanServer, function: str, raw: Any) -> None:
    """gearmand 1.1.20 accepts a 64-byte unique id, keeps 63 bytes of it, never coalesces on it
    and hands the worker the data with a NUL in front; the bundled server refuses it as gearmand
    refuses 65 bytes (docs/gearman.md). Our own client refuses both before sending."""
    fn, unique = function.encode(), b"u" * 63 + b"X"
    client = raw()
    if fresh_gearman.kind == "gearmand":
        first = client.request(pk.SubmitJobBg(fn, unique, b"payload"))
        second = client.request(pk.SubmitJobBg(fn, unique, b"payload"))
        assert first.handle != second.handle  # no coalescing
        worker = raw()
        worker.send(pk.CanDo(fn))
        assigned = worker.request(pk.GrabJobUniq())
        assert (assigned.unique, assigned.data) == (unique[:63], b"\0payload")
    else:
        refused = client.request(pk.SubmitJobBg(fn, unique, b"payload"))
        assert refused == pk.Error(b"ARGUMENT_TOO_LARGE", b"Unique value too large")
    assert client.request(pk.SubmitJobBg(fn, b"v" * 65, b"x")) == pk.Error(
        b"ARGUMENT_TOO_LARGE", b"Unique value too large")
