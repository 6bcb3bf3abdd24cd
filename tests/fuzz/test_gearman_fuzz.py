"""Fuzzing the Gearman cores (what is checked: ``harness.py``).

Three roles: the client/worker side of the binary protocol (``gearman_client._protocol``,
max_body_size 4096 here), the client side of the admin text protocol (``gearman_client._admin``,
with the list parsers run on every list reply), and the server side, which reads both
(``gearman_client._server_protocol``). Inputs: the real-server corpus (``binary-*`` and
``text-*`` pairs), mutated, token soups, random bytes, and packets and lines over the caps.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gearman_client._admin as ga
import gearman_client._packets as gp
from jobwire.errors import LocalProtocolError, RemoteProtocolError

from .harness import (
    ADMIN_DEFAULT,
    GEARMAN_ADMIN,
    GEARMAN_CLIENT,
    GEARMAN_DEFAULT,
    GEARMAN_MAX_BODY,
    GEARMAN_SERVER,
    Entry,
    Role,
    check,
    load_corpus,
    random_cuts,
    role_input,
)
from .strategies import chunkings, fuzz_settings, mutated, requests, token_soup

CORPUS = load_corpus("gearman")


def _req(packet: gp.Packet) -> bytes:
    return gp.encode_packet(packet, gp.REQ)


def _res(ptype: gp.PacketType, body: bytes) -> bytes:
    return b"\0RES" + int(ptype).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body


def _replays() -> list[tuple[Role, Entry]]:
    """Each role with the corpus pairs it can read: the binary client the ``binary-*`` ones,
    the admin client the ``text-*`` ones, the server role all of them."""
    out = []
    for entry in CORPUS:
        binary = entry.name.split("-")[1] == "binary"
        out.append((GEARMAN_CLIENT if binary else GEARMAN_ADMIN, entry))
        out.append((GEARMAN_SERVER, entry))
    return out


#: gearmand closes these connections without a reply; the server role raises.
CLOSED_BY_GEARMAND = ("bad-magic-connection-closed", "unknown-type-99-connection-closed")


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) >= 30
    kinds = {entry.name.split("-")[1] for entry in CORPUS}
    assert kinds == {"binary", "text"}


@pytest.mark.parametrize(("role", "entry"), _replays(), ids=lambda x: x.name)
def test_corpus_replays(role: Role, entry: Entry) -> None:
    data, context = role_input(role, entry)
    error = check(role, data, context).error
    if role is GEARMAN_SERVER and entry.name.endswith(CLOSED_BY_GEARMAND):
        assert error is RemoteProtocolError
    else:
        assert error is None


@fuzz_settings(240)
@given(case=mutated("gearman", "server"), data=st.data())
def test_client_roles_mutated_replies(case: tuple[bytes, Entry], data: st.DataObject) -> None:
    raw, entry = case
    cuts = [data.draw(chunkings(raw))]
    check(GEARMAN_CLIENT, raw, entry.client, cuts)
    check(GEARMAN_ADMIN, raw, entry.client, cuts)


@fuzz_settings(160)
@given(raw=token_soup("gearman"), context=requests(GEARMAN_DEFAULT, _req), data=st.data())
def test_binary_client_token_soup(raw: bytes, context: bytes, data: st.DataObject) -> None:
    check(GEARMAN_CLIENT, raw, context, [data.draw(chunkings(raw))])


@fuzz_settings(160)
@given(raw=token_soup("gearman"), context=requests(ADMIN_DEFAULT), data=st.data())
def test_admin_client_token_soup(raw: bytes, context: bytes, data: st.DataObject) -> None:
    check(GEARMAN_ADMIN, raw, context, [data.draw(chunkings(raw))])


# Well-framed packets with any body: the framing holds, the arguments are what is fuzzed.
@fuzz_settings(160)
@given(
    packets=st.lists(
        st.tuples(st.sampled_from(list(gp.PacketType)), st.binary(max_size=40)), max_size=8
    ),
    context=requests(GEARMAN_DEFAULT, _req),
    data=st.data(),
)
def test_binary_client_any_packet_bodies(
    packets: list[tuple[gp.PacketType, bytes]], context: bytes, data: st.DataObject
) -> None:
    raw = b"".join(_res(ptype, body) for ptype, body in packets)
    check(GEARMAN_CLIENT, raw, context, [data.draw(chunkings(raw))])


@fuzz_settings(240)
@given(case=mutated("gearman", "client"), data=st.data())
def test_server_role_mutated_requests(case: tuple[bytes, Entry], data: st.DataObject) -> None:
    raw, _ = case
    check(GEARMAN_SERVER, raw, b"", [data.draw(chunkings(raw))])


@fuzz_settings(160)
@given(raw=token_soup("gearman"), data=st.data())
def test_server_role_token_soup(raw: bytes, data: st.DataObject) -> None:
    check(GEARMAN_SERVER, raw, b"", [data.draw(chunkings(raw))])


@fuzz_settings(120)
@given(raw=st.binary(max_size=1024), data=st.data())
def test_every_role_random_bytes(raw: bytes, data: st.DataObject) -> None:
    cuts = [data.draw(chunkings(raw))]
    context = _req(gp.EchoReq(b"x")) + b"status\r\n" + _req(gp.GrabJob())
    check(GEARMAN_CLIENT, raw, context, cuts)
    check(GEARMAN_ADMIN, raw, context, cuts)
    check(GEARMAN_SERVER, raw, b"", cuts)


# Over the caps: a packet announcing more than max_body_size is refused from its header; an
# admin line is refused once 64 KiB have come without a "\n"; both before they are buffered.
@fuzz_settings(40)
@given(size=st.integers(GEARMAN_MAX_BODY + 1, 2**32 - 1), data=st.data())
def test_binary_roles_refuse_oversized_packets(size: int, data: st.DataObject) -> None:
    filler = b"x" * 2 * GEARMAN_MAX_BODY
    to_client = _res(gp.PacketType.ECHO_RES, b"")[:8] + size.to_bytes(4, "big") + filler
    to_server = _req(gp.EchoReq(b""))[:8] + size.to_bytes(4, "big") + filler
    context = _req(gp.EchoReq(b"x"))
    cuts = [data.draw(chunkings(to_client))]
    assert check(GEARMAN_CLIENT, to_client, context, cuts).error is RemoteProtocolError
    cuts = [data.draw(chunkings(to_server))]
    assert check(GEARMAN_SERVER, to_server, b"", cuts).error is RemoteProtocolError


@pytest.mark.parametrize("prefix", [b"OK ", b"", b"status", b"H:1\t"])
def test_text_roles_refuse_lines_over_64_kib(prefix: bytes) -> None:
    rng = random.Random(prefix)
    raw = prefix + bytes(rng.choice(b"ab1\t\r :.") for _ in range(70_000))
    cuts = [random_cuts(raw, rng) for _ in range(3)]
    for role, context in ((GEARMAN_ADMIN, b"status\r\n"), (GEARMAN_SERVER, b"")):
        error = check(role, raw, context, cuts, bytewise_limit=0).error
        assert error is not None and issubclass(error, RemoteProtocolError)


@pytest.mark.parametrize(
    "command",
    [ga.CancelJob("\udcff"), ga.MaxQueue("\udcff"), ga.CreateFunction("a\udcff"),
     ga.DropFunction("\udcff")],
    ids=["cancel-job", "maxqueue", "create-function", "drop-function"],
)
def test_admin_send_refuses_unencodable_names_with_a_protocol_error(
    command: ga.AdminCommand,
) -> None:
    with pytest.raises(LocalProtocolError):
        ga.AdminConnection().send(command)
