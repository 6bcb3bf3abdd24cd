"""Tests of the bundled beanstalk server itself.

(The client suite that runs against both this server and the real beanstalkd lives elsewhere.)

* the byte-exact replay of ``beanstalkd-1.12.jsonl`` (recorded from the real server) against the
  bundled one -- and, when ``beanstalkd`` is installed, against the real one too, which proves
  the connection plan and the normalisation below are right rather than tuned to our server;
* the ``python -m beanstalk_client.server`` command line: beanstalkd's flags and signals;
* robustness: garbage, half-open and vanishing clients never hurt the server or other clients;
* the synchronous state machine (``_state``) under a fake clock: TTR, delays, DEADLINE_SOON,
  paused tubes, tube deletion.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from beanstalk_client._commands import (
    Bury,
    Delete,
    Ignore,
    Kick,
    KickJob,
    ListTubesWatched,
    PauseTube,
    PeekBuried,
    PeekDelayed,
    PeekReady,
    Put,
    Release,
    Reserve,
    ReserveJob,
    ReserveWithTimeout,
    Stats,
    StatsJob,
    StatsTube,
    Touch,
    Use,
    Watch,
)
from beanstalk_client._events import (
    DELETED,
    PAUSED,
    RELEASED,
    TOUCHED,
    BuriedReply,
    ErrorCode,
    ErrorReply,
    Found,
    Inserted,
    Kicked,
    Ok,
    Reply,
    Reserved,
    Watching,
)
from beanstalk_client._stats import (
    JOB_KEYS,
    SERVER_KEYS,
    TUBE_KEYS,
    parse_job_stats,
    parse_list,
    parse_server_stats,
    parse_tube_stats,
)
from beanstalk_client.server import Server, run_server, serve
from beanstalk_client.server._serve import _Session
from beanstalk_client.server._state import JOB_OVERHEAD, ConnState, JobState, ServerState
from jobwire import TCPAddress, UnixAddress
from jobwire._serving import Turn
from tests.beanstalk.test_server_core import PUT_FORMS
from tests.conftest import BEANSTALKD_TRANSCRIPT, SERVER_KINDS, fewer_examples, start_server
from tests.waiting import wait_until

TRANSCRIPT = BEANSTALKD_TRANSCRIPT
IO_TIMEOUT = 10.0
SERVER_LOGGER = "beanstalk_client.server"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- a blocking test client that reads whole replies -------------------------------------------

_BODY_WORDS = (b"OK", b"RESERVED", b"FOUND")


def _split_reply(buf: bytes | bytearray) -> int | None:
    """Length of the first complete reply in ``buf`` (line, plus body for OK/RESERVED/FOUND)."""
    end = buf.find(b"\r\n")
    if end < 0:
        return None
    words = bytes(buf[:end]).split(b" ")
    if words[0] in _BODY_WORDS:
        total = end + 2 + int(words[-1]) + 2
        return total if len(buf) >= total else None
    return end + 2


def split_replies(data: bytes) -> list[bytes]:
    """Cut a recorded ``recv`` into replies."""
    out = []
    while data:
        n = _split_reply(data)
        assert n is not None, f"truncated reply in transcript: {data[:60]!r}"
        out.append(data[:n])
        data = data[n:]
    return out


class Wire:
    """A plain socket to a server; ``reply()`` returns exactly one reply."""

    def __init__(self, address: TCPAddress | UnixAddress) -> None:
        if isinstance(address, TCPAddress):
            self.sock = socket.create_connection((address.host, address.port), IO_TIMEOUT)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(IO_TIMEOUT)
            self.sock.connect(address.path)
        self.sock.settimeout(IO_TIMEOUT)
        self.buf = bytearray()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self) -> bytes:
        while (n := _split_reply(self.buf)) is None:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError(f"EOF; unparsed: {bytes(self.buf)!r}")
            self.buf += data
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def ask(self, data: bytes, replies: int = 1) -> bytes:
        self.send(data)
        return b"".join(self.reply() for _ in range(replies))

    def at_eof(self) -> bool:
        """True if the server closed the connection (after any replies already buffered)."""
        if self.buf:
            return False
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def stats(self) -> dict[str, Any]:
        reply = self.ask(b"stats\r\n")
        return dict(parse_server_stats(reply[reply.index(b"\r\n") + 2 : -2]))

    def close(self) -> None:
        self.sock.close()


def connect_when_listening(address: TCPAddress, timeout: float = 10.0) -> Wire:
    """Connect, retrying while the server is still starting (no probe connection: the
    transcript's stats count every connection the server ever accepted)."""
    return wait_until(lambda: Wire(address), timeout, f"a connection to {address}",
                      ignoring=(ConnectionRefusedError,))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- (a) replay of the real server's transcript -------------------------------------------------

# The transcript does not say which connection each exchange used; its own replies pin it down
# (exchanges are numbered from 0, in file order).
# Exchange 8 answers `list-tube-used` with `default` although 1 did `use t-1`, so 7 starts a
# new connection; 23's NOT_IGNORED needs a connection that watches only `default` (beanstalkd
# answers WATCHING for an unwatched tube otherwise), and `stats` (33) counts 4 open connections
# of 5, 1 producer and 2 workers. This plan reproduces all of it; the real-server replay below
# checks that it does.
CONNECTION_OF_EXCHANGE = [1] * 7 + [2] * 12 + [3] * 8 + [4] * 4 + [5] * 6
CLOSE_AFTER = {6}  # connection 1 is dropped after the EXPECTED_CRLF desync
# Delays the recording had in it: job 3 (put with delay 2 in exchange 2) is ready by the peeks
# of 12, while job 5 (released with delay 3 in 11) is still delayed through 13; job 5 is ready
# by the stats of 33. {before exchange: (after exchange, seconds)}
WAIT_BEFORE = {12: (2, 2.05), 33: (11, 3.05)}


def _document(body: bytes) -> list[str]:
    lines = body.decode().split("\n")
    assert lines[0] == "---" and lines[-1] == "", body
    return lines[1:-1]


def _pairs(lines: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for line in lines:
        key, sep, value = line.partition(": ")
        assert sep, line
        pairs.append((key, value))
    return pairs


def _check_value(doc: str, key: str, want: str, got: str, ctx: dict[str, Any]) -> None:
    """Compare one stats value; the few that legitimately differ are checked for shape."""
    uname = os.uname()
    if doc == "server" and key in ("pid", "uptime", "rusage-utime", "rusage-stime", "id",
                                   "hostname", "os", "platform"):
        checks: dict[str, Callable[[str], bool]] = {
            "pid": lambda v: int(v) == ctx["pid"],
            "uptime": lambda v: 0 <= int(v) <= ctx["elapsed"] + 1,
            "rusage-utime": lambda v: re.fullmatch(r"\d+\.\d{6}", v) is not None,
            "rusage-stime": lambda v: re.fullmatch(r"\d+\.\d{6}", v) is not None,
            "id": lambda v: re.fullmatch(r"[0-9a-f]{16}", v) is not None,
            "hostname": lambda v: v == uname.nodename,
            "os": lambda v: v == uname.version,
            "platform": lambda v: v == uname.machine,
        }
        assert checks[key](got), f"{key}: {got!r}"
    elif doc == "job" and key == "age":
        assert 0 <= int(got) <= ctx["elapsed"] + 1, f"age {got}"
    elif doc == "job" and key == "time-left":
        assert int(want) - 1 <= int(got) <= int(want), f"time-left {got}, recorded {want}"
    else:
        assert got == want, f"{key}: {got!r} != recorded {want!r}"


def check_reply(want: bytes, got: bytes, ctx: dict[str, Any]) -> None:
    """``got`` must equal ``want`` byte for byte, except for the normalised stats values."""
    if not want.startswith(b"OK "):
        assert got == want
        return
    head, _, rest = got.partition(b"\r\n")
    assert head.startswith(b"OK ") and int(head[3:]) == len(rest) - 2, got
    want_lines = _document(want[want.index(b"\r\n") + 2 : -2])
    got_lines = _document(rest[:-2])
    if all(line.startswith("- ") for line in want_lines):  # a tube list: exact
        assert got_lines == want_lines
        return
    want_doc, got_doc = _pairs(want_lines), _pairs(got_lines)
    assert [k for k, _ in got_doc] == [k for k, _ in want_doc]  # key set and order
    keys = {k for k, _ in want_doc}
    doc = "server" if "pid" in keys else "job" if "tube" in keys else "tube"
    for (key, want_value), (_, got_value) in zip(want_doc, got_doc, strict=True):
        _check_value(doc, key, want_value, got_value, ctx)


def replay_transcript(address: TCPAddress, pid: int) -> None:
    """Run every exchange of the transcript in order and compare what comes back."""
    exchanges = [json.loads(line) for line in TRANSCRIPT.read_text().splitlines()]
    assert len(exchanges) == len(CONNECTION_OF_EXCHANGE)
    wires: dict[int, Wire] = {}
    answered_at: dict[int, float] = {}
    start = time.monotonic()
    try:
        for i, exchange in enumerate(exchanges):
            if i in WAIT_BEFORE:
                since, seconds = WAIT_BEFORE[i]
                time.sleep(max(0.0, answered_at[since] + seconds - time.monotonic()))
            n = CONNECTION_OF_EXCHANGE[i]
            wire = wires.get(n) or wires.setdefault(n, connect_when_listening(address))
            wire.send(exchange["send"].encode("latin-1"))
            recv = exchange["recv"]
            if recv == "<EOF>":
                assert wire.at_eof(), f"exchange {i}: connection still open"
            else:
                ctx = {"pid": pid, "elapsed": time.monotonic() - start}
                for want in split_replies(recv.encode("latin-1")):
                    got = wire.reply()
                    try:
                        check_reply(want, got, ctx)
                    except AssertionError as exc:
                        raise AssertionError(
                            f"exchange {i} ({exchange['note']}):\n  recorded {want!r}\n"
                            f"  received {got!r}\n  {exc}"
                        ) from None
            answered_at[i] = time.monotonic()
            if i in CLOSE_AFTER:
                wires.pop(n).close()
    finally:
        for wire in wires.values():
            wire.close()


@pytest.fixture
def no_server_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail if any connection task of the server died of an unexpected exception."""
    caplog.set_level(logging.WARNING, logger=SERVER_LOGGER)
    yield
    errors = [r for r in caplog.records if r.name == SERVER_LOGGER and r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def test_replay_transcript_bundled(no_server_errors: None) -> None:
    with run_server(max_job_size=1024) as server:
        assert isinstance(server.address, TCPAddress)
        replay_transcript(server.address, os.getpid())


@pytest.fixture
def real_beanstalkd() -> Iterator[tuple[TCPAddress, int]]:
    binary = shutil.which("beanstalkd")
    if binary is None:
        if os.environ.get("JOBWIRE_REQUIRE_REAL_SERVERS") == "1":  # as tests/conftest.py does
            pytest.fail("beanstalkd is not installed and JOBWIRE_REQUIRE_REAL_SERVERS=1")
        pytest.skip("beanstalkd is not installed")
    # Not conftest's start_server: its readiness probe is a connection, and the transcript's
    # stats count every connection the server accepted.
    port = free_port()
    proc = subprocess.Popen([binary, "-l", "127.0.0.1", "-p", str(port), "-z", "1024"])
    try:
        yield TCPAddress("127.0.0.1", port), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=5)


@pytest.mark.real_server
def test_replay_transcript_real_beanstalkd(real_beanstalkd: tuple[TCPAddress, int]) -> None:
    # The same replay against the server the transcript was recorded from: if this fails, the
    # connection plan or the normalisation is wrong, not the bundled server.
    replay_transcript(*real_beanstalkd)


@pytest.mark.parametrize("kind", SERVER_KINDS)
@pytest.mark.parametrize("write", [1 << 20, 7], ids=["one-write", "7-byte-writes"])
def test_pipelined_put_forms_are_answered_as_beanstalkd_answers(kind: str, write: int) -> None:
    # Every put form of the core's test (the common one the core reads in one step and those
    # only its general path reads), pipelined; then what each stored job holds.
    expected: list[bytes] = []
    stored: list[tuple[int, Put]] = []
    next_id = 1
    for _, events in PUT_FORMS:
        for event in events:
            if isinstance(event, Put):
                expected.append(b"INSERTED %d\r\n" % next_id)
                stored.append((next_id, event))
                next_id += 1
            else:
                expected.append(event[1].encode() + b"\r\n")
                next_id += event[1] == "EXPECTED_CRLF"  # beanstalkd made the job first
    data = b"use forms\r\n" + b"".join(line for line, _ in PUT_FORMS)
    srv = start_server(kind, max_job_size=8)
    wire = Wire(TCPAddress(srv.host, srv.port))
    try:
        for i in range(0, len(data), write):
            wire.send(data[i : i + write])
        assert wire.reply() == b"USING forms\r\n"
        assert [wire.reply() for _ in expected] == expected
        for job_id, put in stored:
            assert wire.ask(b"peek %d\r\n" % job_id) == (
                b"FOUND %d %d\r\n%b\r\n" % (job_id, len(put.body), put.body))
            reply = wire.ask(b"stats-job %d\r\n" % job_id)
            job = dict(parse_job_stats(reply[reply.index(b"\r\n") + 2 : -2]))
            assert (job["pri"], job["delay"], job["ttr"], job["state"]) == (
                put.priority, put.delay, put.ttr or 1, "delayed" if put.delay else "ready")
    finally:
        wire.close()
        srv.stop()


def test_timers_years_away_leave_the_server_serving() -> None:
    # A put delayed 2**32-1 s and a reserve waiting as long put the loop's next timer past
    # the longest wait epoll accepts: its select raised OverflowError and the server's loop
    # died, every connection with it.
    with run_server() as srv:
        delayed, waiting, other = (Wire(srv.address) for _ in range(3))
        try:
            assert delayed.ask(b"put 0 4294967295 10 1\r\nx\r\n") == b"INSERTED 1\r\n"
            waiting.send(b"reserve-with-timeout 4294967295\r\n")
            wait_until(lambda: srv.call(lambda: srv.state.counts["cmd-reserve-with-timeout"]))
            assert other.ask(b"put 0 0 10 1\r\ny\r\n") == b"INSERTED 2\r\n"
            assert waiting.reply() == b"RESERVED 2 1\r\ny\r\n"
            assert delayed.ask(b"list-tube-used\r\n") == b"USING default\r\n"
        finally:
            for wire in (delayed, waiting, other):
                wire.close()


#: Numbers for a put's fields: within 32 bits, one past, ten digits past, eleven digits.
_PUT_NUMBERS = st.sampled_from([0, 1, 65536, 2**31, 2**32 - 1, 2**32, 9_999_999_999, 10**10])
#: Delays that never run out during the test (a delayed job turning ready on one server and
#: not yet on the other would be a difference of time, not of paths).
_PUT_DELAYS = st.sampled_from([0, 0, 2**31, 2**32 - 1, 2**32])
_OTHER_COMMANDS = [
    b"use a\r\n", b"use b\r\n", b"watch b\r\n", b"ignore default\r\n",
    b"reserve-with-timeout 0\r\n", b"delete 1\r\n", b"delete 2\r\n", b"bury 3 5\r\n",
    b"release 4 7 0\r\n", b"kick 2\r\n", b"peek-ready\r\n", b"peek-delayed\r\n",
    b"stats-tube a\r\n", b"pause-tube b 0\r\n", b"put 1 0 1\r\n", b"put \r\n", b"junk\r\n",
    b"put 1 0 10 3\r", b"\n", b"x" * 230 + b"\r\n", *(line for line, _ in PUT_FORMS),
]


@st.composite
def _put_stream(draw: st.DrawFn) -> bytes:
    """Commands a producer might pipeline: runs of puts in the common form (numbers in and out
    of range, bodies of the right length and not, too big, holding CRLF) among other commands
    and put forms only the general path reads."""
    parts: list[bytes] = []
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from(_OTHER_COMMANDS)))
            continue
        pri, delay, ttr = draw(_PUT_NUMBERS), draw(_PUT_DELAYS), draw(_PUT_NUMBERS)
        size = draw(st.integers(0, 10))  # the servers take up to 8 bytes
        body = draw(st.sampled_from([b"x" * size, b"y" * (size + 1), b"\r\n" * (size // 2)]))
        put = b"put %d %d %d %d\r\n%b\r\n" % (pri, delay, ttr, size, body)
        parts.append(put * draw(st.sampled_from([1, 2, 70, 150])))  # past a turn (64) too
    return b"".join(parts)


def _served(server: Server, stream: bytes, cuts: list[int]) -> tuple[bytes, Any]:
    """Everything ``server`` answers to ``stream`` (sent in pieces at ``cuts``, then the
    sending side closed), and what its state holds afterwards."""
    wire = Wire(server.address)
    try:
        at = 0
        for cut in [*sorted(cuts), len(stream)]:
            wire.send(stream[at:cut])
            at = cut
        wire.sock.shutdown(socket.SHUT_WR)
        replies = bytearray()
        while data := wire.sock.recv(1 << 16):
            replies += data
    finally:
        wire.close()

    def snapshot() -> Any:
        state = server.state
        jobs = sorted((job.id, job.tube.name, job.priority, job.delay, job.ttr, job.body,
                       job.state) for job in state.jobs.values())
        return jobs, dict(state.counts), state.memory

    return bytes(replies), server.call(snapshot)


class _GeneralPathOnly(_Session):
    def fast_path(self, out: bytearray, turn: Turn) -> bool:
        return False  # every command goes through next_event


@fewer_examples(2)
@given(data=st.data())
def test_the_put_fast_path_answers_and_stores_as_the_general_path(data: st.DataObject) -> None:
    # The bundled server stores a pipelined put in its common form without a Put event or an
    # Inserted reply (its fast path): every stream must get the same bytes back and leave
    # the same jobs and counters as on a server reading everything through next_event.
    stream = data.draw(_put_stream())
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    # Room for a few jobs only (OUT_OF_MEMORY), or none at all (DRAINING), now and then.
    max_memory = data.draw(st.sampled_from([None, None, 5 * (JOB_OVERHEAD + 8)]))
    draining = data.draw(st.sampled_from([False, False, False, True]))
    with (
        run_server(max_job_size=8, max_memory=max_memory) as fast,
        run_server(max_job_size=8, max_memory=max_memory) as general,
    ):
        general._loop.open_session = lambda conn: _GeneralPathOnly(conn, general.state)
        if draining:
            fast.drain()
            general.drain()
        assert _served(fast, stream, cuts) == _served(general, stream, cuts)


def _ok(doc: bytes) -> bytes:
    return b"OK %d\r\n%b\r\n" % (len(doc), doc)


def test_check_reply_catches_differences() -> None:
    # The replay's comparison is only as good as this function: it must not wave through a
    # wrong value, a reordered or missing key, or a wrong length.
    ctx = {"pid": 7, "elapsed": 10.0}
    job = _ok(b"---\nid: 2\ntube: t\nage: 3\ntime-left: 59\n")
    check_reply(job, job, ctx)
    check_reply(job, _ok(b"---\nid: 2\ntube: t\nage: 0\ntime-left: 58\n"), ctx)
    for bad in (
        _ok(b"---\nid: 3\ntube: t\nage: 3\ntime-left: 59\n"),  # another job id
        _ok(b"---\ntube: t\nid: 2\nage: 3\ntime-left: 59\n"),  # keys reordered
        _ok(b"---\nid: 2\ntube: t\nage: 3\n"),  # a key missing
        _ok(b"---\nid: 2\ntube: t\nage: 3\ntime-left: 57\n"),  # time-left off by 2
        b"OK 40" + job[job.index(b"\r\n") :],  # wrong length (the document has 39 bytes)
    ):
        with pytest.raises(AssertionError):
            check_reply(job, bad, ctx)
    server = _ok(b"---\ncurrent-jobs-ready: 1\npid: 1\nid: 00eef20ba8557bac\n")
    check_reply(server, _ok(b"---\ncurrent-jobs-ready: 1\npid: 7\nid: 0123456789abcdef\n"), ctx)
    with pytest.raises(AssertionError):
        check_reply(server, _ok(b"---\ncurrent-jobs-ready: 2\npid: 7\nid: 0123456789abcdef\n"), ctx)
    with pytest.raises(AssertionError):
        check_reply(server, _ok(b"---\ncurrent-jobs-ready: 1\npid: 8\nid: 0123456789abcdef\n"), ctx)
    with pytest.raises(AssertionError):
        check_reply(b"INSERTED 1\r\n", b"INSERTED 2\r\n", ctx)


# -- (b) the command line --------------------------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "beanstalk_client.server", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _connect_when_up(proc: subprocess.Popen[bytes], address: TCPAddress | UnixAddress) -> Wire:
    def connected() -> Wire:
        if proc.poll() is not None:
            _, err = proc.communicate(timeout=5)
            raise AssertionError(f"server did not come up: {err.decode()}")
        return Wire(address)

    return wait_until(connected, 15, f"the server to listen on {address}", ignoring=(OSError,))


@contextlib.contextmanager
def _killed_on_error(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_tcp_drain_and_sigterm() -> None:
    port = free_port()
    proc = _spawn("-l", "127.0.0.1", "-p", str(port), "-z", "2048")
    with _killed_on_error(proc):
        wire = _connect_when_up(proc, TCPAddress("127.0.0.1", port))
        assert wire.ask(b"put 0 0 60 2048\r\n" + b"a" * 2048 + b"\r\n") == b"INSERTED 1\r\n"
        assert wire.ask(b"put 0 0 60 2049\r\n" + b"a" * 2049 + b"\r\n") == b"JOB_TOO_BIG\r\n"
        stats = wire.stats()
        assert (stats["max-job-size"], stats["draining"]) == (2048, "false")
        assert stats["pid"] == proc.pid

        proc.send_signal(signal.SIGUSR1)
        wait_until(lambda: wire.stats()["draining"] == "true", 5, "drain mode")
        assert wire.ask(b"put 0 0 60 1\r\nb\r\n") == b"DRAINING\r\n"
        assert wire.ask(b"reserve-with-timeout 0\r\n").startswith(b"RESERVED 1 2048\r\n")

        waiter = Wire(TCPAddress("127.0.0.1", port))  # a blocked reserve must not delay exit
        waiter.send(b"watch nothing-here\r\nignore default\r\nreserve\r\n")
        assert waiter.reply() == b"WATCHING 2\r\n"
        assert waiter.reply() == b"WATCHING 1\r\n"
        wait_until(lambda: wire.stats()["current-waiting"] == 1, 5, "the reserve to wait")
        proc.send_signal(signal.SIGTERM)  # exits with the reserve still blocked, not after it
        out, err = proc.communicate(timeout=5)
        assert proc.returncode == 0, err.decode()
        assert out == b""
        assert wire.at_eof() and waiter.at_eof()
        wire.close()
        waiter.close()


def test_cli_unix_socket_verbose_and_ignored_flags(tmp_path: Path) -> None:
    path = str(tmp_path / "bs.sock")
    proc = _spawn("-l", f"unix:{path}", "-V", "-b", str(tmp_path), "-f", "50", "-F",
                  "-u", "nobody")
    with _killed_on_error(proc):
        wire = _connect_when_up(proc, UnixAddress(path))
        assert wire.ask(b"list-tube-used\r\n") == b"USING default\r\n"
        assert wire.ask(b"put 1 0 5 3\r\nabc\r\nreserve\r\n", 2) == (
            b"INSERTED 1\r\nRESERVED 1 3\r\nabc\r\n"
        )
        wire.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=5)
    assert proc.returncode == 0, err.decode()
    assert out == b""
    text = err.decode()
    for flag in ("-b", "-f", "-F", "-u"):
        assert f"warning: {flag} " in text
    assert "open " in text and "close " in text  # -V logs connections
    assert not os.path.exists(path)  # the socket file is removed on exit


def test_cli_signals_while_starting_are_kept() -> None:
    """Listening comes before the event loop runs; SIGUSR1 or SIGTERM sent as soon as the
    server listens is acted on, not left to its default action (SIGUSR1 would kill it)."""
    port = free_port()
    proc = _spawn("-l", "127.0.0.1", "-p", str(port))
    with _killed_on_error(proc):
        wire = _connect_when_up(proc, TCPAddress("127.0.0.1", port))
        proc.send_signal(signal.SIGUSR1)
        wait_until(lambda: wire.stats()["draining"] == "true", 5, "drain mode")
        assert wire.ask(b"put 0 0 60 1\r\nx\r\n") == b"DRAINING\r\n"
        wire.close()
    port = free_port()
    proc = _spawn("-l", "127.0.0.1", "-p", str(port))
    with _killed_on_error(proc):
        _connect_when_up(proc, TCPAddress("127.0.0.1", port)).close()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err.decode()


def test_cli_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beanstalk_client.server", "-v"],
        capture_output=True, timeout=30, check=True,
    )
    assert proc.stdout.decode().startswith("beanstalkd 1.12")


# -- (c) robustness ----------------------------------------------------------------------------


@pytest.fixture
def bundled(no_server_errors: None) -> Iterator[Server]:
    """A bundled server of the test's own, in a thread of this process."""
    with run_server() as srv:
        yield srv


def _tcp(server: Server) -> Wire:
    assert isinstance(server.address, TCPAddress)
    return Wire(server.address)


def assert_still_serving(server: Server) -> None:
    """A fresh connection can put, reserve and delete."""
    wire = _tcp(server)
    try:
        wire.send(b"use fresh\r\nwatch fresh\r\nignore default\r\nput 0 0 10 2\r\nok\r\n"
                  b"reserve-with-timeout 5\r\n")
        assert wire.reply() == b"USING fresh\r\n"
        assert wire.reply() == b"WATCHING 2\r\n"
        assert wire.reply() == b"WATCHING 1\r\n"
        inserted = wire.reply()
        assert inserted.startswith(b"INSERTED ")
        job_id = int(inserted.split()[1])
        assert wire.reply() == b"RESERVED %d 2\r\nok\r\n" % job_id
        assert wire.ask(b"delete %d\r\n" % job_id) == b"DELETED\r\n"
    finally:
        wire.close()


def _spew(server: Server, data: bytes) -> None:
    wire = _tcp(server)
    wire.sock.settimeout(2)
    with contextlib.suppress(OSError):
        wire.send(data)
        wire.sock.shutdown(socket.SHUT_WR)
        while wire.sock.recv(1 << 16):
            pass
    wire.close()


def test_random_binary_garbage(bundled: Server) -> None:
    rng = random.Random(1234)
    for size in (1, 17, 224, 225, 4096, 1 << 16, 1 << 20):
        _spew(bundled, rng.randbytes(size))
    # garbage that looks like commands with absurd arguments
    _spew(bundled, b"put 99999999999999999999 0 0 1\r\nput 0 0 0 18446744073709551616\r\n")
    _spew(bundled, b"put 0 0 0 4294967296\r\n" + b"\r\n" * 1000)
    _spew(bundled, b"reserve-with-timeout -99999999999999999999999\r\nkick-job -1\r\n")
    assert_still_serving(bundled)


def test_huge_line_without_crlf(bundled: Server) -> None:
    wire = _tcp(bundled)
    wire.send(b"x" * (4 << 20))  # 4 MiB, never a CRLF: discarded as it arrives
    assert wire.ask(b"\r\nlist-tube-used\r\n", 2) == b"BAD_FORMAT\r\nUSING default\r\n"
    wire.close()
    assert_still_serving(bundled)


def test_nul_bytes(bundled: Server) -> None:
    wire = _tcp(bundled)
    body = b"\x00a\x00\r\n\x00"
    assert wire.ask(b"put 0 0 10 %d\r\n%b\r\n" % (len(body), body)) == b"INSERTED 1\r\n"
    assert wire.ask(b"reserve\r\n") == b"RESERVED 1 %d\r\n%b\r\n" % (len(body), body)
    # beanstalkd checks for a NUL before it looks at the command word (measured).
    assert wire.ask(b"\x00\x00\x00\r\n") == b"BAD_FORMAT\r\n"
    assert wire.ask(b"use a\x00b\r\n") == b"BAD_FORMAT\r\n"
    assert wire.ask(b"delete \x001\r\n") == b"BAD_FORMAT\r\n"
    assert wire.ask(b"delete 1\r\n") == b"DELETED\r\n"
    wire.close()
    assert_still_serving(bundled)


def test_half_close_mid_put(bundled: Server) -> None:
    wire = _tcp(bundled)
    wire.send(b"put 0 0 10 100\r\n" + b"z" * 50)
    wire.sock.shutdown(socket.SHUT_WR)
    assert wire.at_eof()  # closed, no reply: the job never existed
    wire.close()
    probe = _tcp(bundled)
    assert probe.ask(b"peek-ready\r\n") == b"NOT_FOUND\r\n"
    assert probe.stats()["total-jobs"] == 0
    probe.close()
    assert_still_serving(bundled)


def test_half_close_while_reserve_waits_gets_timed_out(bundled: Server) -> None:
    wire = _tcp(bundled)
    wire.send(b"reserve\r\n")
    wait_until(lambda: _waiting(bundled) == 1, 5, "reserve to wait")
    wire.sock.shutdown(socket.SHUT_WR)
    assert wire.reply() == b"TIMED_OUT\r\n"
    assert wire.at_eof()
    wire.close()
    assert_still_serving(bundled)


def _waiting(server: Server) -> int:
    probe = _tcp(server)
    try:
        return int(probe.stats()["current-waiting"])
    finally:
        probe.close()


@pytest.mark.parametrize("abortive", [False, True], ids=["close", "reset"])
def test_disconnect_while_reserve_waits(bundled: Server, abortive: bool) -> None:
    gone = _tcp(bundled)
    held = gone.ask(b"put 0 0 60 4\r\nheld\r\nreserve\r\n", 2)
    assert held == b"INSERTED 1\r\nRESERVED 1 4\r\nheld\r\n"
    gone.send(b"reserve\r\n")  # waits: nothing else is ready
    wait_until(lambda: _waiting(bundled) == 1, 5, "reserve to wait")
    if abortive:  # RST instead of FIN
        gone.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    gone.close()
    wait_until(lambda: bundled.call(lambda: bundled.state.connections) == 0, 5,
               "the close to be noticed")

    wire = _tcp(bundled)
    stats = wire.stats()
    assert (stats["current-waiting"], stats["current-jobs-ready"]) == (0, 1)  # job 1 is back
    # The next put must not be handed to the vanished reserve.
    assert wire.ask(b"put 0 0 60 3\r\nnew\r\n") == b"INSERTED 2\r\n"
    assert wire.ask(b"reserve-with-timeout 1\r\n") == b"RESERVED 1 4\r\nheld\r\n"
    assert wire.ask(b"reserve-with-timeout 1\r\n") == b"RESERVED 2 3\r\nnew\r\n"
    wire.close()
    assert_still_serving(bundled)


def test_many_connections_open_and_close(bundled: Server) -> None:
    wires = [_tcp(bundled) for _ in range(200)]
    for i, wire in enumerate(wires):
        if i % 2:
            assert wire.ask(b"use t%d\r\n" % i) == b"USING t%d\r\n" % i
    for wire in wires:
        wire.close()
    wait_until(lambda: bundled.call(lambda: bundled.state.connections) == 0, 5,
               "200 closes")
    probe = _tcp(bundled)
    stats = probe.stats()
    assert stats["total-connections"] == 201
    assert stats["current-tubes"] == 1  # every t<i> went away with its connection
    probe.close()
    assert_still_serving(bundled)


def test_bad_connections_do_not_affect_a_waiting_worker(bundled: Server) -> None:
    worker = _tcp(bundled)
    worker.send(b"reserve\r\n")
    wait_until(lambda: _waiting(bundled) == 1, 5, "reserve to wait")
    rng = random.Random(99)
    for _ in range(10):
        _spew(bundled, rng.randbytes(3000))
    _spew(bundled, b"put 0 0 10 5\r\nabc")  # half a put, then EOF
    producer = _tcp(bundled)
    job_id = int(producer.ask(b"put 0 0 10 3\r\nfor\r\n").split()[1])
    assert worker.reply() == b"RESERVED %d 3\r\nfor\r\n" % job_id
    worker.close()
    producer.close()


def test_pipelined_commands_behind_a_waiting_reserve_stay_in_order(bundled: Server) -> None:
    worker = _tcp(bundled)
    worker.send(b"reserve\r\nlist-tube-used\r\nstats-job 1\r\n")
    wait_until(lambda: _waiting(bundled) == 1, 5, "reserve to wait")
    producer = _tcp(bundled)
    assert producer.ask(b"put 0 0 10 1\r\nx\r\n") == b"INSERTED 1\r\n"
    assert worker.reply() == b"RESERVED 1 1\r\nx\r\n"
    assert worker.reply() == b"USING default\r\n"
    assert b"\nstate: reserved\n" in worker.reply()  # ran after the reserve, not before
    worker.close()
    producer.close()


# -- the async API ------------------------------------------------------------------------------


async def _ask(stream: anyio.abc.ByteStream, data: bytes, size: int) -> bytes:
    await stream.send(data)
    got = b""
    with anyio.fail_after(IO_TIMEOUT):
        while len(got) < size:
            got += await stream.receive()
    return got


@pytest.mark.anyio
async def test_serve_tcp_and_drain() -> None:
    async with serve(max_job_size=10) as server:
        assert isinstance(server.address, TCPAddress)
        assert server.url == f"beanstalk://127.0.0.1:{server.address.port}"
        assert server.max_job_size == 10
        async with await anyio.connect_tcp("127.0.0.1", server.address.port) as stream:
            assert await _ask(stream, b"put 0 0 1 10\r\n0123456789\r\n", 12) == b"INSERTED 1\r\n"
            assert not server.draining
            server.drain()
            assert server.draining
            assert await _ask(stream, b"put 0 0 1 1\r\nx\r\n", 10) == b"DRAINING\r\n"


@pytest.mark.anyio
async def test_serve_unix_socket_and_cleanup(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    async with serve(unix_path=path) as server:
        assert server.address == UnixAddress(path)
        assert server.url == f"unix://{path}"
        async with await anyio.connect_unix(path) as stream:
            assert await _ask(stream, b"list-tube-used\r\n", 15) == b"USING default\r\n"
    assert not os.path.exists(path)


@pytest.mark.anyio
async def test_serve_reraises_the_body_error_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with serve():
            raise KeyError("mine")


def test_serve_rejects_an_absurd_max_job_size() -> None:
    with pytest.raises(ValueError), run_server(max_job_size=(1 << 30) + 1):
        pass


# -- (d) the state machine under a fake clock ----------------------------------------------------


class Fake:
    """A ServerState driven by a hand-moved clock, with helpers to run commands."""

    def __init__(self) -> None:
        self.now = 0.0
        self.state = ServerState(self.now, max_job_size=100)
        self.woken: list[int] = []

    def conn(self) -> ConnState:
        conn = self.state.connect(self.now)
        conn.on_reply = lambda: self.woken.append(conn.id)
        return conn

    def run(self, conn: ConnState, command: Any) -> Reply | None:
        return self.state.execute(conn, command, self.now)

    def job_state(self, job_id: int) -> JobState:
        return self.state.jobs[job_id].state

    def at(self, now: float) -> None:
        self.now = now
        self.state.advance(now)

    def job_stats(self, conn: ConnState, job_id: int) -> dict[str, Any]:
        reply = self.run(conn, StatsJob(job_id))
        assert isinstance(reply, Ok)
        return dict(parse_job_stats(reply.data))

    def tube_stats(self, conn: ConnState, tube: str) -> dict[str, Any]:
        reply = self.run(conn, StatsTube(tube))
        assert isinstance(reply, Ok)
        return dict(parse_tube_stats(reply.data))

    def stats(self, conn: ConnState) -> dict[str, Any]:
        reply = self.run(conn, Stats())
        assert isinstance(reply, Ok)
        return dict(parse_server_stats(reply.data))


NOT_FOUND = ErrorReply(ErrorCode.NOT_FOUND)
TIMED_OUT = ErrorReply(ErrorCode.TIMED_OUT)
DEADLINE_SOON = ErrorReply(ErrorCode.DEADLINE_SOON)


def test_state_ttr_expiry() -> None:
    f = Fake()
    c = f.conn()
    assert f.run(c, Put(b"job", ttr=5)) == Inserted(1)
    assert f.run(c, Reserve()) == Reserved(1, b"job")
    assert f.state.next_deadline() == 5.0
    f.at(4.999)
    assert f.job_state(1) is JobState.RESERVED
    assert f.job_stats(c, 1)["time-left"] == 0  # 0.001 s, truncated as beanstalkd does
    f.at(5.0)
    assert f.job_state(1) is JobState.READY
    assert f.job_stats(c, 1)["timeouts"] == 1
    assert f.stats(c)["job-timeouts"] == 1
    assert f.run(c, Delete(1)) == DELETED  # a ready job may be deleted by anyone
    assert f.state.next_deadline() is None


def test_state_touch_restarts_ttr_and_ttr_zero_is_one() -> None:
    f = Fake()
    c = f.conn()
    f.run(c, Put(b"a", ttr=0))
    assert f.job_stats(c, 1)["ttr"] == 1
    f.run(c, Put(b"b", priority=1, ttr=10))
    f.run(c, Reserve())
    f.run(c, Reserve())
    f.at(0.5)
    assert f.run(c, Touch(2)) == TOUCHED
    f.at(1.0)  # job 1 (ttr 1) times out; job 2 was touched at 0.5
    assert f.job_state(1) is JobState.READY
    f.at(10.4)
    assert f.job_state(2) is JobState.RESERVED
    f.at(10.5)
    assert f.job_state(2) is JobState.READY
    assert f.run(c, Touch(2)) == NOT_FOUND


def test_state_delay() -> None:
    f = Fake()
    c = f.conn()
    f.run(c, Put(b"late", delay=5))
    f.run(c, Put(b"soon", delay=3))
    assert f.run(c, PeekDelayed()) == Found(2, b"soon")  # shortest delay left first
    assert f.run(c, ReserveWithTimeout(0)) == TIMED_OUT
    f.at(0.5)
    stats = f.job_stats(c, 2)
    assert (stats["state"], stats["delay"], stats["time-left"]) == ("delayed", 3, 2)
    f.at(2.999)
    assert f.run(c, PeekReady()) == NOT_FOUND
    f.at(3.0)
    assert f.run(c, PeekReady()) == Found(2, b"soon")
    assert f.tube_stats(c, "default")["current-jobs-delayed"] == 1


def test_state_delayed_job_wakes_a_waiting_reserve() -> None:
    f = Fake()
    producer, worker = f.conn(), f.conn()
    f.run(producer, Put(b"x", delay=2))
    assert f.run(worker, Reserve()) is None
    assert f.state.next_deadline() == 2.0
    f.at(2.0)
    assert f.woken == [worker.id]
    assert worker.take_reply() == Reserved(1, b"x")


def test_state_deadline_soon_margin() -> None:
    f = Fake()
    c, other = f.conn(), f.conn()
    f.run(c, Put(b"a", ttr=3))
    assert f.run(c, Reserve()) == Reserved(1, b"a")
    f.at(1.5)
    assert f.run(c, Reserve()) is None  # 1.5 s before the deadline: waits
    assert f.state.next_deadline() == 2.0  # the margin: deadline (3) - 1 s
    f.at(1.999)
    assert c.reply is None
    f.at(2.0)
    assert c.take_reply() == DEADLINE_SOON
    assert f.job_state(1) is JobState.RESERVED  # DEADLINE_SOON extends nothing
    f.at(2.5)
    assert f.run(c, ReserveWithTimeout(10)) == DEADLINE_SOON  # inside the margin: at once
    f.run(other, Put(b"b", ttr=3))
    assert f.run(c, Reserve()) == Reserved(2, b"b")  # ...unless a job is ready
    f.run(other, Put(b"c", delay=100))
    assert f.run(c, ReserveJob(3)) == Reserved(3, b"c")  # reserve-job never DEADLINE_SOON
    f.at(3.0)
    assert f.job_state(1) is JobState.READY


def test_state_reserve_with_timeout() -> None:
    f = Fake()
    c = f.conn()
    f.at(10.0)
    assert f.run(c, ReserveWithTimeout(2)) is None
    assert f.stats(f.conn())["current-waiting"] == 1
    f.at(11.999)
    assert c.reply is None
    f.at(12.0)
    assert c.take_reply() == TIMED_OUT
    assert f.tube_stats(f.conn(), "default")["current-waiting"] == 0


def test_state_timeout_shorter_than_the_margin_wins() -> None:
    f = Fake()
    c = f.conn()
    f.run(c, Put(b"a", ttr=10))
    f.run(c, Reserve())
    assert f.run(c, ReserveWithTimeout(2)) is None
    f.at(2.0)
    assert c.take_reply() == TIMED_OUT


def test_state_pause_tube() -> None:
    f = Fake()
    c, worker = f.conn(), f.conn()
    f.run(c, Put(b"x"))
    assert f.run(c, PauseTube("nope", 5)) == NOT_FOUND
    assert f.run(c, PauseTube("default", 10)) == PAUSED
    assert f.run(worker, ReserveWithTimeout(0)) == TIMED_OUT
    assert f.run(worker, Reserve()) is None
    f.at(2.5)
    stats = f.tube_stats(c, "default")
    assert (stats["pause"], stats["pause-time-left"], stats["cmd-pause-tube"]) == (10, 7, 1)
    assert stats["current-waiting"] == 1
    f.at(10.0)
    assert worker.take_reply() == Reserved(1, b"x")
    stats = f.tube_stats(c, "default")
    assert (stats["pause"], stats["pause-time-left"]) == (0, 0)
    assert f.stats(c)["cmd-pause-tube"] == 2


def test_state_pause_zero_and_other_tubes() -> None:
    f = Fake()
    c, worker = f.conn(), f.conn()
    f.run(c, Use("a"))
    f.run(c, Put(b"in-a", priority=0))
    f.run(c, Use("b"))
    f.run(c, Put(b"in-b", priority=9))
    for tube in ("a", "b"):
        f.run(worker, Watch(tube))
    f.run(c, PauseTube("a", 60))
    assert f.run(worker, Reserve()) == Reserved(2, b"in-b")  # a is paused
    assert f.run(worker, Reserve()) is None
    f.run(c, PauseTube("a", 0))  # a pause of 0 ends the pause at once
    assert worker.take_reply() == Reserved(1, b"in-a")


def test_state_tube_auto_delete() -> None:
    f = Fake()
    c = f.conn()
    f.run(c, Use("foo"))
    assert f.state.tube_names() == ["default", "foo"]
    f.run(c, Use("default"))
    assert f.state.tube_names() == ["default"]  # nobody uses foo and it holds no job
    f.run(c, Use("foo"))
    f.run(c, Put(b"j"))
    f.run(c, Use("default"))
    assert f.state.tube_names() == ["default", "foo"]  # its job keeps it
    f.run(c, Watch("foo"))
    f.run(c, Ignore("default"))
    f.run(c, Reserve())
    f.run(c, Watch("default"))
    f.run(c, Ignore("foo"))
    assert f.state.tube_names() == ["default", "foo"]  # a reserved job keeps it too
    assert f.run(c, Bury(1, 5)) == BuriedReply()
    assert f.run(c, Delete(1)) == DELETED
    assert f.state.tube_names() == ["default"]
    assert f.run(c, StatsTube("foo")) == NOT_FOUND
    assert f.run(c, Ignore("default")) == ErrorReply(ErrorCode.NOT_IGNORED)
    watcher = f.conn()
    f.run(watcher, Watch("w"))
    f.state.disconnect(watcher, f.now)
    assert f.state.tube_names() == ["default"]


def test_state_list_orders_follow_beanstalkd() -> None:
    # Measured against beanstalkd 1.12: removal moves the last element into the hole.
    f = Fake()
    a, c = f.conn(), f.conn()
    f.run(a, Watch("x1"))
    for name in ("t1", "t2", "t3", "t4"):
        f.run(c, Use(name))
    assert f.state.tube_names() == ["default", "x1", "t4"]
    for name in ("w1", "w2", "w3"):
        f.run(c, Watch(name))
    assert f.run(c, Ignore("default")) == Watching(3)
    reply = f.run(c, ListTubesWatched())
    assert isinstance(reply, Ok)
    assert parse_list(reply.data) == ["w3", "w1", "w2"]
    assert f.run(c, Ignore("not-watched")) == Watching(3)
    assert "not-watched" not in f.state.tube_names()
    g = Fake()
    users = [g.conn() for _ in range(3)]
    for user, name in zip(users, ("ua", "ub", "uc"), strict=True):
        g.run(user, Use(name))
    g.state.disconnect(users[0], g.now)
    assert g.state.tube_names() == ["default", "uc", "ub"]


def test_state_delete_release_bury_kick_rules() -> None:
    f = Fake()
    a, b = f.conn(), f.conn()
    for body in (b"1", b"2", b"3", b"4"):
        f.run(a, Put(body))
    f.run(a, Put(b"5", delay=9))
    f.run(a, Put(b"6", delay=4))
    assert f.run(a, Reserve()) == Reserved(1, b"1")
    assert f.run(b, Delete(1)) == NOT_FOUND  # reserved by another connection
    assert f.run(b, Release(1)) == NOT_FOUND
    assert f.run(b, Bury(1)) == NOT_FOUND
    assert f.run(b, Touch(1)) == NOT_FOUND
    assert f.run(b, KickJob(1)) == NOT_FOUND  # reserved jobs cannot be kicked
    assert f.run(b, ReserveJob(1)) == NOT_FOUND
    assert f.run(a, Bury(1, 7)) == BuriedReply()
    for _ in range(2):
        reply = f.run(a, Reserve())
        assert isinstance(reply, Reserved)
        f.run(a, Bury(reply.job_id))
    assert f.run(a, PeekBuried()) == Found(1, b"1")  # oldest buried first
    assert f.run(a, Kick(2)) == Kicked(2)  # buried only, FIFO
    assert [f.job_state(i) for i in (1, 2, 3)] == [
        JobState.READY, JobState.READY, JobState.BURIED,
    ]
    assert f.run(a, Kick(10)) == Kicked(1)  # the last buried one; delayed ones wait
    assert f.run(a, Kick(1)) == Kicked(1)  # nothing buried: the soonest delayed job
    assert f.job_state(6) is JobState.READY
    assert f.run(a, KickJob(5)) == Kicked()
    assert f.job_stats(a, 5)["kicks"] == 1
    assert f.run(a, Reserve()) == Reserved(1, b"1")  # bury gave it priority 7
    assert f.run(a, Release(1, 70000, 0)) == RELEASED
    assert f.run(a, Reserve()) == Reserved(2, b"2")  # 2..6 tie at 65536: lowest id first
    assert f.run(a, Release(2, 0, 30)) == RELEASED
    stats = f.job_stats(a, 2)
    assert (stats["state"], stats["pri"], stats["delay"], stats["releases"]) == (
        "delayed", 0, 30, 1,
    )
    assert f.run(b, Delete(2)) == DELETED  # delayed: anyone may delete it
    assert f.run(b, Delete(3)) == DELETED  # ready: likewise
    assert f.run(b, Delete(99)) == NOT_FOUND


def test_state_disconnect_returns_jobs_and_wakes_waiters() -> None:
    f = Fake()
    holder, waiter = f.conn(), f.conn()
    f.run(holder, Put(b"x", ttr=100))
    f.run(holder, Reserve())
    assert f.run(waiter, Reserve()) is None
    f.at(1.0)
    f.state.disconnect(holder, f.now)
    assert waiter.take_reply() == Reserved(1, b"x")
    assert f.job_stats(waiter, 1)["timeouts"] == 0  # returned, not timed out
    assert f.state.next_deadline() == 101.0  # only the new reservation's TTR
    f.state.disconnect(waiter, 2.0)
    assert f.job_state(1) is JobState.READY
    assert f.state.connections == 0


def test_state_half_close() -> None:
    f = Fake()
    c = f.conn()
    assert f.run(c, Reserve()) is None
    f.state.half_close(c, f.now)
    assert c.take_reply() == TIMED_OUT
    assert f.run(c, Reserve()) == TIMED_OUT  # a later reserve does not wait either
    f.run(f.conn(), Put(b"x"))
    assert f.run(c, Reserve()) == Reserved(1, b"x")


def test_state_waiters_are_served_oldest_first() -> None:
    f = Fake()
    w1, w2, p = f.conn(), f.conn(), f.conn()
    assert f.run(w1, Reserve()) is None
    assert f.run(w2, Reserve()) is None
    f.run(p, Put(b"a"))
    f.run(p, Put(b"b"))
    assert (w1.take_reply(), w2.take_reply()) == (Reserved(1, b"a"), Reserved(2, b"b"))
    assert f.woken == [w1.id, w2.id]


def test_state_counters_of_rejected_puts_and_drain() -> None:
    f = Fake()
    c = f.conn()
    f.state.bad_request(c, ErrorCode.JOB_TOO_BIG, f.now)
    stats = f.stats(c)
    assert (stats["cmd-put"], stats["current-producers"]) == (1, 0)
    f.state.bad_request(c, ErrorCode.EXPECTED_CRLF, f.now)  # uses up job id 1
    f.state.bad_request(c, ErrorCode.BAD_FORMAT, f.now)  # counts nothing
    assert f.run(c, Put(b"x")) == Inserted(2)
    f.state.draining = True
    assert f.run(c, Put(b"y")) == ErrorReply(ErrorCode.DRAINING)
    stats = f.stats(c)
    assert (stats["cmd-put"], stats["total-jobs"], stats["current-producers"]) == (4, 1, 1)
    assert stats["draining"] == "true"


def test_state_stats_documents_have_beanstalkd_keys() -> None:
    f = Fake()
    c = f.conn()
    f.run(c, Put(b"x", priority=2000))
    for command, keys in ((Stats(), SERVER_KEYS), (StatsJob(1), JOB_KEYS),
                          (StatsTube("default"), TUBE_KEYS)):
        reply = f.run(c, command)
        assert isinstance(reply, Ok)
        assert [line.split(": ")[0] for line in reply.data.decode().splitlines()[1:]] == list(
            keys
        )
    stats = f.stats(c)
    assert (stats["current-jobs-ready"], stats["current-jobs-urgent"]) == (1, 0)  # pri >= 1024
    assert (stats["version"], stats["binlog-max-size"], stats["max-job-size"]) == (
        "1.12", 10485760, 100,
    )


@given(
    priorities=st.lists(st.integers(0, 5), min_size=1, max_size=300),
    deleted=st.sets(st.integers(1, 300)),
)
def test_state_ready_order_survives_lazy_deletion(priorities: list[int], deleted: set[int]) -> None:
    f = Fake()
    c = f.conn()
    for pri in priorities:
        f.run(c, Put(b"", priority=pri))
    for job_id in sorted(deleted):
        f.run(c, Delete(job_id))
    survivors = sorted(
        (pri, job_id) for job_id, pri in enumerate(priorities, 1) if job_id not in deleted
    )
    got = []
    while isinstance(reply := f.run(c, ReserveWithTimeout(0)), Reserved):
        got.append((f.state.jobs[reply.job_id].priority, reply.job_id))
    assert got == survivors
    assert reply == TIMED_OUT


def test_state_timer_heap_sweep_keeps_every_live_timer() -> None:
    # 300 delayed jobs and the dead TTR timers of 300 deleted reservations fill the heap; when
    # the delays run out, the waiter's cancelled timer makes the heap sweep its dead entries in
    # the middle of advance(). Every delayed job must still become ready exactly once.
    f = Fake()
    producer, worker, waiter = f.conn(), f.conn(), f.conn()
    f.run(producer, Use("other"))
    for _ in range(300):
        f.run(producer, Put(b"r", ttr=100))
    f.run(worker, Watch("other"))
    f.run(worker, Ignore("default"))
    reserved = [f.run(worker, Reserve()) for _ in range(300)]
    f.run(producer, Use("default"))
    for _ in range(300):
        f.run(producer, Put(b"d", delay=5))
    for reply in reserved:
        assert isinstance(reply, Reserved)
        assert f.run(worker, Delete(reply.job_id)) == DELETED
    assert f.run(waiter, ReserveWithTimeout(50)) is None
    f.at(5.0)
    assert waiter.take_reply() == Reserved(301, b"d")
    stats = f.tube_stats(producer, "default")
    assert (stats["current-jobs-ready"], stats["current-jobs-delayed"]) == (299, 0)
    assert stats["current-jobs-reserved"] == 1
    assert f.state.next_deadline() == 65.0  # the waiter's job's TTR (60), nothing stale
    f.at(65.0)
    assert f.tube_stats(producer, "default")["current-jobs-ready"] == 300
    assert f.state.next_deadline() is None
