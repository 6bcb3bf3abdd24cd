"""What a hostile or broken Gearman server, or a hostile name, cannot do to the client: admin list
replies are capped, numbers in admin replies are read strictly, function names and unique ids
that would forge admin listings are refused before anything is sent, and bulk calls report
every job's outcome as a :class:`jobwire.errors.BulkError`."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from gearman_client import (
    Admin,
    AsyncAdmin,
    BulkSubmitError,
    Client,
    GearmanError,
    ServerError,
)
from gearman_client import _packets as pk
from gearman_client._admin import MAX_LIST_LINES, MAX_LIST_SIZE, AdminConnection, Status
from jobwire.errors import (
    BulkError,
    ConnectionLost,
    LocalProtocolError,
    NotSent,
    RemoteProtocolError,
)

from ..hostile import Hostile, hostile_server, peer_server, repeat
from .conftest import GearmanServer

# -- admin list replies that never end ------------------------------------------------------------

LINE = b"f" * 57 + b"\t1\t0\t0\n"  # 64 bytes, a plausible status line (never a ".")


def endless_list(total: int) -> Any:
    """An admin answer of ``total`` bytes of list lines and no final ``.``, then silence."""
    return lambda _: repeat(LINE, total)


def test_the_core_refuses_a_list_past_its_caps_at_once() -> None:
    assert (MAX_LIST_LINES, MAX_LIST_SIZE) == (1_000_000, 16 << 20)
    for caps, limit in [({}, MAX_LIST_SIZE), ({"max_list_lines": 1000}, 1000 * len(LINE)),
                        ({"max_list_size": 5000}, 5000)]:
        conn = AdminConnection(**caps)
        conn.send(Status())
        fed = 0
        with pytest.raises(RemoteProtocolError, match="without its final"):
            for chunk in repeat(LINE, 64 << 20):
                conn.receive_data(chunk)
                fed += len(chunk)
                conn.next_event()
        assert fed <= limit + 65536 + len(LINE), (caps, fed)


def test_admin_refuses_a_list_that_never_ends_and_closes_the_connection() -> None:
    with (
        hostile_server(endless_list(24 << 20)) as peer,  # past the default 16 MiB, then silence
        Admin(f"127.0.0.1:{peer.port}", timeout=5) as admin,
    ):
        with pytest.raises(RemoteProtocolError, match="max_list_size"):
            admin.status()
        assert peer.wait_closed(), "the admin kept the connection open"
        with pytest.raises(ConnectionLost):
            admin.status()


@pytest.mark.anyio
async def test_async_admin_refuses_a_list_that_never_ends_and_closes_the_connection() -> None:
    with hostile_server(endless_list(24 << 20)) as peer:
        async with AsyncAdmin(f"127.0.0.1:{peer.port}", timeout=5) as admin:
            with pytest.raises(RemoteProtocolError, match="max_list_size"):
                await admin.show_jobs()
            assert peer.wait_closed(), "the admin kept the connection open"


def test_admin_list_caps_are_configurable() -> None:
    with hostile_server(lambda _: [LINE * 1000 + b".\n"]) as peer:
        address = f"127.0.0.1:{peer.port}"
        with (
            Admin(address, timeout=5, max_list_lines=999) as admin,
            pytest.raises(RemoteProtocolError, match="max_list_lines=999"),
        ):
            admin.status()
        with (
            Admin(address, timeout=5, max_list_size=len(LINE) * 999) as admin,
            pytest.raises(RemoteProtocolError, match="max_list_size"),
        ):
            admin.status()
        with Admin(address, timeout=5, max_list_lines=1000) as admin:
            assert len(admin.status()) == 1000


# -- numbers in admin replies --------------------------------------------------------------------

BIG = b"9" * 5000  # past Python's 4,300-digit int() limit


@pytest.mark.parametrize(
    ("call", "reply"),
    [
        ("status", b"f\t%s\t0\t0\n.\n" % BIG),
        ("priority_status", b"f\t0\t%s\t0\t0\n.\n" % BIG),
        ("show_jobs", b"H:vm:1\t%s\t0\t1\n.\n" % BIG),
        ("workers", b"%s 127.0.0.1 - : f\n.\n" % BIG),
        ("status", b"f\t\xc2\xb2\t0\t0\n.\n"),  # "²": str.isdigit() says yes
        ("getpid", "OK ²\n".encode()),
        ("getpid", b"OK %s\n" % BIG),
        ("getpid", b"OK +12\n"),
    ],
)
def test_numbers_in_admin_answers_are_strict(call: str, reply: bytes) -> None:
    with (
        hostile_server(lambda _: [reply]) as peer,
        Admin(f"127.0.0.1:{peer.port}") as admin,
        pytest.raises(RemoteProtocolError),
    ):
        getattr(admin, call)()


# -- names and unique ids that would forge admin listings -----------------------------------------

FORGING_NAMES = [
    "x\t0\t0\t0\nforged",  # a status row of its own
    "nl\n.\nafter",  # ends every admin list early
    "a b",  # two functions in ``workers``
    "cr\rx",
    "del\x7f",
    "\x01",
]
FORGING_UNIQUES = ["u\nforged\t9\t9\t9", "u\n.\nz", "tab\tu", "cr\ru", "nul\0u", "bell\x07"]


@pytest.mark.parametrize("name", FORGING_NAMES)
def test_function_names_that_would_forge_admin_listings_are_refused_before_sending(
    gearman_server: GearmanServer, function: str, name: str
) -> None:
    with Client(gearman_server.url, timeout=5) as client, Admin(gearman_server.url) as admin:
        before = {s.function for s in admin.status()}
        for raw in (name, name.encode()):
            with pytest.raises(LocalProtocolError, match="whitespace or control"):
                client.submit_background(raw, b"data")
            with pytest.raises(LocalProtocolError, match="whitespace or control"):
                client.submit(raw, b"data")
            with pytest.raises(LocalProtocolError, match="whitespace or control"):
                client.submit_background_many([(function, b"first"), (raw, b"data")])
            with pytest.raises(LocalProtocolError, match="whitespace or control"):
                client.submit_reduce(function, b"data", reducer=raw)
            with pytest.raises(LocalProtocolError):
                admin.create_function(name)
        # Nothing reached the server: the connection is in step, and the only new function
        # is the one submitted now (the bulk calls above sent not even their first job).
        client.submit_background(function, b"ok")
        rows = admin.status()
        assert {s.function for s in rows} - before == {function}
        assert [s.queued for s in rows if s.function == function] == [1]
        assert admin.getpid() > 0  # every list answer parsed: the server is healthy


@pytest.mark.parametrize("unique", FORGING_UNIQUES)
def test_unique_ids_with_control_bytes_are_refused_before_sending(
    gearman_server: GearmanServer, function: str, unique: str
) -> None:
    with Client(gearman_server.url, timeout=5) as client, Admin(gearman_server.url) as admin:
        before = set(admin.show_unique_jobs())
        with pytest.raises(LocalProtocolError, match=r"control bytes|NUL"):
            client.submit_background(function, b"data", unique=unique)
        with pytest.raises(LocalProtocolError, match=r"control bytes|NUL"):
            client.submit(function, b"data", unique=unique.encode())
        with pytest.raises(LocalProtocolError, match=r"control bytes|NUL"):
            client.get_status_unique(unique)
        # A space is harmless in ``show unique jobs`` (one id per line) and stays allowed.
        client.submit_background(function, b"ok", unique=f"ok {function}")
        assert set(admin.show_unique_jobs()) - before == {f"ok {function}".encode()}


# -- bulk calls: every job's outcome, as a jobwire BulkError ---------------------------------------


def gearman_peer(answer: int, *, complete: bool = False) -> Any:
    """A server that answers OPTION_REQ, answers the first ``answer`` submits (JOB_CREATED, and
    WORK_COMPLETE when ``complete``), then closes the connection at the next one."""

    def handle(conn: socket.socket, state: Hostile) -> None:
        decoder = pk.PacketDecoder(pk.REQ)
        answered = 0
        while True:
            data = conn.recv(65536)
            if not data:
                return
            decoder.feed(data)
            while (packet := decoder.next_packet()) is not None:
                if isinstance(packet, pk.OptionReq):
                    conn.sendall(pk.encode_packet(pk.OptionRes(packet.name), pk.RES))
                    continue
                if answered == answer:
                    conn.shutdown(socket.SHUT_RDWR)
                    conn.close()
                    return
                answered += 1
                handle_ = b"H:peer:%d" % answered
                out = pk.encode_packet(pk.JobCreated(handle_), pk.RES)
                if complete:
                    out += pk.encode_packet(pk.WorkComplete(handle_, b"done"), pk.RES)
                conn.sendall(out)

    return handle


def check_bulk(error: BulkSubmitError, first: list[Any], total: int) -> None:
    assert isinstance(error, BulkError) and isinstance(error, GearmanError)
    assert error.results[: len(first)] == first
    assert error.index == len(first) and isinstance(error.error, ConnectionLost)
    assert error.done == list(enumerate(first))
    rest = error.results[len(first):]
    assert len(rest) == total - len(first)
    assert all(isinstance(r, (ConnectionLost, NotSent)) for r in rest), rest
    assert error.__cause__ is error.error


def test_submit_background_many_reports_every_job_when_the_connection_dies() -> None:
    with (
        peer_server(gearman_peer(2)) as peer,
        Client(f"127.0.0.1:{peer.port}") as client,
        pytest.raises(BulkSubmitError) as info,
    ):
        client.submit_background_many([("f", b"x")] * 6, window=2)
    check_bulk(info.value, [b"H:peer:1", b"H:peer:2"], 6)


def test_submit_many_reports_every_job_when_the_connection_dies() -> None:
    with (
        peer_server(gearman_peer(1, complete=True)) as peer,
        Client(f"127.0.0.1:{peer.port}") as client,
        pytest.raises(BulkSubmitError) as info,
    ):
        client.submit_many([("f", b"x")] * 4, window=1)
    check_bulk(info.value, [b"done"], 4)


def test_bulk_submit_error_keeps_its_attributes_for_refusals(
    fresh_gearman: GearmanServer, function: str
) -> None:
    with Client(fresh_gearman.url) as client, Admin(fresh_gearman.url) as admin:
        client.submit_background(function, b"first")  # gearmand needs the function to exist
        admin.maxqueue(function, 2)
        with pytest.raises(BulkError) as info:  # the collection's BulkError ...
            client.submit_background_many([(function, b"x")] * 3, window=1)
    error = info.value
    assert isinstance(error, BulkSubmitError)  # ... is gearman's BulkSubmitError
    assert isinstance(error.results[0], bytes) and isinstance(error.results[1], ServerError)
    assert error.index == 1 and error.error is error.results[1]
    assert [i for i, _ in error.done] == [0]
