"""The collection's one address rule (jobwire._url): every accepted form, every refusal.

The per-package tests (tests/*/test_addresses.py) connect with each form to real servers; this
file pins the rule itself, including the errors raised for what it refuses.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobwire import InvalidAddress, LocalProtocolError, TCPAddress, UnixAddress
from jobwire._url import resolve_address, resolve_addresses


def resolve(address: object, port: object = None, *, unix: bool = True) -> object:
    return resolve_address(address, port, scheme="beanstalk", default_port=11300, unix=unix)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("beanstalk://h.example:1", TCPAddress("h.example", 1)),
        ("beanstalk://h.example", TCPAddress("h.example", 11300)),
        ("beanstalk://[::1]:5", TCPAddress("::1", 5)),
        ("unix:///run/b.sock", UnixAddress("/run/b.sock")),
        ("beanstalk+unix:///run/b.sock", UnixAddress("/run/b.sock")),
        ("127.0.0.1:11301", TCPAddress("127.0.0.1", 11301)),
        ("localhost", TCPAddress("localhost", 11300)),
        ("[::1]:7", TCPAddress("::1", 7)),
        ("[::1]", TCPAddress("::1", 11300)),
        ("::1", TCPAddress("::1", 11300)),
        ("[fe80::1%eth0]:4", TCPAddress("fe80::1%eth0", 4)),
        (("127.0.0.1", 9), TCPAddress("127.0.0.1", 9)),
        ("/run/b.sock", UnixAddress("/run/b.sock")),
        ("./b.sock", UnixAddress("./b.sock")),
        (Path("/run/b.sock"), UnixAddress("/run/b.sock")),
        (TCPAddress("h", 3), TCPAddress("h", 3)),
        (UnixAddress("/x"), UnixAddress("/x")),
    ],
)
def test_accepted_forms(given: object, expected: object) -> None:
    assert resolve(given) == expected


def test_host_and_port_arguments() -> None:
    assert resolve("127.0.0.1", 11400) == TCPAddress("127.0.0.1", 11400)
    assert resolve("::1", 5) == TCPAddress("::1", 5)


@pytest.mark.parametrize(
    "given",
    [
        "", " h", "h ", "h:0", "h:65536", "h:x", "h:-1", "h:", ":11300", "h:1:2x", "[::1",
        "[::1]x", "a b", "h\r\n:1", "gearman://h", "beanstalk://h/path", "beanstalk://h:99999",
        "unix://", "h:١٢", "11300",
    ],
)
def test_malformed_strings_are_invalid_address(given: str) -> None:
    with pytest.raises(InvalidAddress) as info:
        resolve(given)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, LocalProtocolError)


@pytest.mark.parametrize("given", [11300, None, b"h:1", ("h",), ("h", "1"), ("h", 1, 2), 1.5])
def test_wrong_types_are_type_errors(given: object) -> None:
    with pytest.raises(TypeError):
        resolve(given)


def test_port_argument_only_with_a_bare_host() -> None:
    with pytest.raises(InvalidAddress):
        resolve("h:1", 2)
    with pytest.raises(InvalidAddress):
        resolve(("h", 1), 2)
    with pytest.raises(TypeError):
        resolve("h", "2")
    with pytest.raises(TypeError):
        resolve("h", True)
    with pytest.raises(InvalidAddress):
        resolve("h", 0)


def test_unix_refused_where_the_protocol_has_none() -> None:
    for given in ("/run/w.sock", "unix:///run/w.sock", Path("/x"), UnixAddress("/x")):
        with pytest.raises(InvalidAddress, match="TCP only"):
            resolve(given, unix=False)


def test_server_lists() -> None:
    def servers(given: object) -> list[object]:
        return list(resolve_addresses(given, scheme="gearman", default_port=4730))

    assert servers("a:1,b") == [TCPAddress("a", 1), TCPAddress("b", 4730)]
    assert servers("a:1, b:2") == [TCPAddress("a", 1), TCPAddress("b", 2)]
    assert servers(["gearman://a", ("b", 3)]) == [TCPAddress("a", 4730), TCPAddress("b", 3)]
    assert servers(("a", 5)) == [TCPAddress("a", 5)]
    assert servers(("a:1", "b:2")) == [TCPAddress("a", 1), TCPAddress("b", 2)]
    with pytest.raises(InvalidAddress):
        servers([])
    with pytest.raises(InvalidAddress):
        servers("a:1,,b")
    with pytest.raises(TypeError):
        servers(4730)


@pytest.mark.parametrize(
    "url",
    ["beanstalk://[::1:11300", "beanstalkd://[::1", "workq://[::1", "gearman://[zz",
     "gearman://[zz]:4730", "redis://[::1", "rediss://:pw@[::1/0", "workq://[::1]]:1",
     "beanstalk+unix://[x"],
)
def test_malformed_ipv6_urls_are_invalid_address_in_every_package(url: str) -> None:
    # urllib raises a plain ValueError('Invalid IPv6 URL'); every package's constructor must
    # raise InvalidAddress naming the URL instead.
    import beanstalk_client
    import gearman_client
    import qless_client
    import workq_client

    scheme, build = next(
        (scheme, build) for scheme, build in [
            ("beanstalk", beanstalk_client.AsyncClient), ("gearman", gearman_client.AsyncClient),
            ("workq", workq_client.AsyncClient), ("redis", qless_client.AsyncRedis),
        ] if url.startswith(scheme)
    )
    with pytest.raises(InvalidAddress, match=r"^'[a-z+]+://") as info:
        build(url)
    assert "pw" not in str(info.value)
    if scheme != "redis":
        with pytest.raises(InvalidAddress):
            resolve_address(url, scheme=scheme, default_port=1)
