"""A hostile or broken Workq server cannot make the client spend unbounded CPU or memory: the
Sans-IO core does work linear in what it is sent, refuses replies past its caps at once, and
the sync and async clients then close the connection."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from types import FrameType
from typing import Any

import anyio
import pytest

from jobwire.errors import RemoteProtocolError
from workq_client import AsyncClient, Client
from workq_client import _protocol as protocol_module
from workq_client._commands import InspectJob, InspectJobs, InspectServer
from workq_client._events import InspectReply
from workq_client._protocol import MAX_FIELDS, MAX_RECORD_SIZE, Connection

from ..hostile import hostile_server, repeat

STARTED = b"started 2024-01-01T00:00:00Z\r\n"
JOB_ID = str(uuid.UUID(int=1, version=4))


def server_record(fields: int) -> bytes:
    """``inspect server`` as Workq 0.2.0 sends it (2 keys announced), with ``fields`` more keys
    before ``started``."""
    extra = b"".join(b"k%d %d\r\n" % (i, i) for i in range(fields))
    return b"+OK 1\r\nserver 2\r\nactive-clients 1\r\nevicted-jobs 0\r\n" + extra + STARTED


# -- linear work ---------------------------------------------------------------------------------


def lines_run(data: bytes, **caps: int) -> int:
    """Feed ``data`` to a core awaiting ``inspect server`` and count the lines of
    ``workq_client/_protocol.py`` it runs to read the reply (a measure of work, not of time)."""
    conn = Connection(**caps)
    conn.send(InspectServer())
    conn.receive_data(data)
    target = protocol_module.__file__
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def call(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == target else None

    sys.settrace(call)
    try:
        event = conn.next_event()
    finally:
        sys.settrace(None)
    assert isinstance(event, InspectReply)
    return count


def test_the_core_does_work_linear_in_the_keys_of_a_record() -> None:
    """Twice the keys, about twice the work: the server record's keys past the announced count
    used to be rescanned on each new one (40k keys took 66 s)."""
    small = lines_run(server_record(1000), max_fields=10_000)
    large = lines_run(server_record(2000), max_fields=10_000)
    assert large / small < 2.2, (small, large)


def test_the_core_reads_a_record_of_40k_keys_when_allowed() -> None:
    conn = Connection(max_fields=50_000)
    conn.send(InspectServer())
    conn.receive_data(server_record(40_000))  # about 500 KB
    event = conn.next_event()
    assert isinstance(event, InspectReply)
    [record] = event.records
    assert len(record.fields) == 40_003 and record.fields[-1] == ("started", STARTED[8:-2])


@pytest.mark.anyio
async def test_async_client_reads_40k_keys_without_blocking_its_loop_past_a_deadline() -> None:
    """Through a real socket: the reply is read, and the loop is free again, well within 10 s
    (66 s before the parse was linear)."""
    data = server_record(40_000)
    with hostile_server(lambda _: [data]) as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=30, max_fields=50_000) as client:
            with anyio.fail_after(10):
                info = await client.inspect_server()
    assert info.active_clients == 1 and len(info.extra) == 40_000


# -- caps, in the core -----------------------------------------------------------------------------


def bytes_fed_until_refused(conn: Connection, stream: Iterator[bytes]) -> int:
    """Feed ``stream`` chunk by chunk; return how many bytes went in before the core raised
    ``RemoteProtocolError`` (fails if it never does)."""
    fed = 0
    for chunk in stream:
        conn.receive_data(chunk)
        fed += len(chunk)
        try:
            conn.next_event()
        except RemoteProtocolError:
            return fed
    raise AssertionError(f"no RemoteProtocolError after {fed} bytes")


RECORD = b"%s 1\r\nkey value\r\n" % JOB_ID.encode()  # one valid record of one key
FIELD = b"key value\r\n"


def endless(head: bytes, unit: bytes, total: int = 8 << 20) -> Iterator[bytes]:
    """``head``, then ``unit`` again and again (valid records, or valid keys)."""
    yield head
    yield from repeat(unit, total)


@pytest.mark.parametrize(
    ("command", "head", "unit"),
    [
        # More records than the command asked for (``limit``; one for ``inspect job``).
        (InspectJobs("q", 0, 5), b"+OK 99999999999\r\n", RECORD),
        (InspectJobs("q", 0, 5), b"+OK 6\r\n", RECORD),
        (InspectJob(JOB_ID), b"+OK 2\r\n", RECORD),
        # A record announcing 1e11 keys, or more than max_fields.
        (InspectJob(JOB_ID), b"+OK 1\r\n%s 100000000000\r\n" % JOB_ID.encode(), FIELD),
        (InspectJob(JOB_ID), b"+OK 1\r\n%s 257\r\n" % JOB_ID.encode(), FIELD),
        # The server record read past its count (Workq 0.2.0) and never reaching "started".
        (InspectServer(), b"+OK 1\r\nserver 2\r\n", FIELD),
    ],
    ids=["1e11-records", "limit+1-records", "2-jobs", "1e11-keys", "257-keys", "no-started"],
)
def test_the_core_refuses_an_oversized_reply_at_once(
    command: Any, head: bytes, unit: bytes
) -> None:
    conn = Connection()
    conn.send(command)
    fed = bytes_fed_until_refused(conn, endless(head, unit))
    assert fed <= len(head) + 65536  # the first chunk: nothing close to the 8 MiB offered
    with pytest.raises(RemoteProtocolError):
        conn.next_event()  # poisoned


def test_the_core_caps_the_bytes_of_a_record_and_refuses_a_payload_that_would_pass_it() -> None:
    big_value = b"v" * 60_000
    conn = Connection()
    conn.send(InspectJob(JOB_ID))
    head = b"+OK 1\r\n%s 200\r\n" % JOB_ID.encode()
    stream = iter([head, *(b"k%d %s\r\n" % (i, big_value) for i in range(200))])
    fed = bytes_fed_until_refused(conn, stream)
    assert MAX_RECORD_SIZE < fed < MAX_RECORD_SIZE + 2 * len(big_value)

    conn = Connection(max_record_size=1000)
    conn.send(InspectJob(JOB_ID))
    conn.receive_data(head + b"name q\r\npayload-size 2000\r\n")  # refused before the payload
    with pytest.raises(RemoteProtocolError, match="max_record_size=1000"):
        conn.next_event()


def test_the_caps_are_the_documented_defaults_and_a_real_sized_job_record_fits() -> None:
    assert (MAX_FIELDS, MAX_RECORD_SIZE) == (256, 1_048_576 + 65536)
    payload = b"p" * 1_048_576
    record = (
        b"+OK 1\r\n%s 12\r\nname q\r\nttr 1000\r\nttl 60000\r\npayload-size %d\r\npayload %s\r\n"
        b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\nstate 0\r\n"
        b"created 2024-01-01T00:00:00Z\r\n" % (JOB_ID.encode(), len(payload), payload)
    )
    conn = Connection()
    conn.send(InspectJob(JOB_ID))
    conn.receive_data(record)
    event = conn.next_event()
    assert isinstance(event, InspectReply) and event.records[0].get("payload") == payload


# -- caps, through the clients ---------------------------------------------------------------------


HOSTILE_REPLIES = [
    pytest.param(b"+OK 99999999999\r\n", RECORD, id="endless-records"),
    pytest.param(b"+OK 1\r\n%s 100000000000\r\n" % JOB_ID.encode(), FIELD, id="1e11-keys"),
]


def script_for(head: bytes, unit: bytes) -> Any:
    """The hostile reply: 8 MiB of it, then silence (it never ends)."""
    return lambda _: endless(head, unit, 8 << 20)


@pytest.mark.parametrize(("head", "unit"), HOSTILE_REPLIES)
def test_sync_client_raises_and_closes_the_connection(head: bytes, unit: bytes) -> None:
    with (
        hostile_server(script_for(head, unit)) as peer,
        Client("127.0.0.1", peer.port, timeout=5) as client,
    ):
        with pytest.raises(RemoteProtocolError):
            if head.startswith(b"+OK 9"):
                client.inspect_jobs("q", limit=10)
            else:
                client.inspect_job(JOB_ID)
        assert peer.wait_closed(), "the client kept the connection open"


@pytest.mark.anyio
@pytest.mark.parametrize(("head", "unit"), HOSTILE_REPLIES)
async def test_async_client_raises_and_closes_the_connection(head: bytes, unit: bytes) -> None:
    with hostile_server(script_for(head, unit)) as peer:
        async with AsyncClient("127.0.0.1", peer.port, timeout=5) as client:
            with pytest.raises(RemoteProtocolError):
                if head.startswith(b"+OK 9"):
                    await client.inspect_jobs("q", limit=10)
                else:
                    await client.inspect_job(JOB_ID)
            assert peer.wait_closed(), "the client kept the connection open"


def test_the_client_caps_are_configurable() -> None:
    data = server_record(300)  # past the default of 256 keys
    with hostile_server(lambda _: [data]) as peer:
        with (
            Client("127.0.0.1", peer.port, timeout=5) as client,
            pytest.raises(RemoteProtocolError, match="max_fields=256"),
        ):
            client.inspect_server()
        with Client("127.0.0.1", peer.port, timeout=5, max_fields=400) as client:
            assert len(client.inspect_server().extra) == 300
        with (
            Client("127.0.0.1", peer.port, timeout=5, max_record_size=100) as client,
            pytest.raises(RemoteProtocolError, match="max_record_size=100"),
        ):
            client.inspect_server()
