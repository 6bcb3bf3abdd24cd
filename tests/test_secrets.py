"""No error, repr or CLI message shows a credential (issue 19).

An address may carry a password (``redis://user:PW@host``, ``?password=PW``, and any scheme's
``scheme://user:PW@host``): whatever refuses it, and whatever shows it afterwards, writes
``***`` in its place (or leaves the credentials out).
"""

from __future__ import annotations

import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator

import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire._url import redact
from jobwire.errors import InvalidAddress
from jobwire.testing import BeanstalkServer, GearmanServer, RedisServer, WorkqServer, start_redis

SECRET = "s3cretPW"

#: Each package's constructors that take an address, by scheme.
BUILDERS: dict[str, list[Callable[[str], object]]] = {
    "beanstalk": [beanstalk_client.Client, beanstalk_client.AsyncClient,
                  lambda url: beanstalk_client.Worker(url)],
    "gearman": [gearman_client.Client, gearman_client.AsyncClient, gearman_client.Admin,
                lambda url: gearman_client.Worker(url)],
    "workq": [workq_client.Client, workq_client.AsyncClient,
              lambda url: workq_client.Worker(url, "q")],
    "redis": [qless_client.Redis, qless_client.AsyncRedis, qless_client.Client,
              lambda url: qless_client.Worker(url, queues=["q"])],
}

#: Addresses each scheme refuses, each holding the secret.
BAD = {
    "any": [
        "{scheme}://user:{secret}@127.0.0.1:99999",
        "{scheme}://:{secret}@127.0.0.1:port",
        "{scheme}://:{secret}@[::1",
        "{scheme}://:{secret}@[::1]:11300/path",
        "{scheme}://u:{secret}@127.0.0.1:1#frag",
        "{scheme}://u:p@ss{secret}@127.0.0.1:0",
        "{scheme}://{secret}@127.0.0.1:0",
        "{scheme}://127.0.0.1:1/?password={secret}&x=1",
        "{scheme}://127.0.0.1:1/?token={secret}",
    ],
    "redis": [
        "redis://:{secret}@127.0.0.1:1/abc",
        "redis://user:{secret}@127.0.0.1:1/0?db=1",
        "redis://127.0.0.1:1/?password={secret}&db=x",
        "redis://127.0.0.1:1/?password={secret}&password=again",
        "redis://127.0.0.1:1/?password={secret}&bogus=1",
        "unix:///tmp/redis.sock?password={secret}&db=-1",
        "redis://:{secret}@127.0.0.1:1/0#frag",
        "redis://:{secret}@[::1/0",
    ],
}


def _refusals() -> list[tuple[str, int, str]]:
    cases = []
    for scheme, builders in BUILDERS.items():
        urls = BAD["any"] + (BAD["redis"] if scheme == "redis" else [])
        for url in urls:
            for index in range(len(builders)):
                cases.append((scheme, index, url.format(scheme=scheme, secret=SECRET)))
    return cases


def shown(exc: BaseException) -> str:
    """Everything an error shows: str, repr and its formatted traceback (with its cause)."""
    return "\n".join([str(exc), repr(exc), *traceback.format_exception(exc)])


@pytest.mark.parametrize(("scheme", "index", "url"), _refusals())
def test_refused_addresses_never_show_the_secret(scheme: str, index: int, url: str) -> None:
    builder = BUILDERS[scheme][index]
    with pytest.raises((InvalidAddress, TypeError)) as info:
        builder(url)
    assert SECRET not in shown(info.value)
    assert "127.0.0.1" in str(info.value) or "::1" in str(info.value) or "sock" in str(info.value)


@pytest.fixture(scope="module")
def redis_with_password() -> Iterator[RedisServer]:
    server = start_redis("--requirepass", SECRET)
    try:
        yield server
    finally:
        server.stop()


def _check_shown(obj: object) -> None:
    assert SECRET not in repr(obj) and SECRET not in str(obj), repr(obj)
    assert SECRET not in repr(getattr(obj, "options", None))
    redis = getattr(obj, "redis", None)
    assert SECRET not in repr(redis) and SECRET not in repr(getattr(redis, "options", None))


def test_reprs_never_show_the_secret(
    beanstalk_server: BeanstalkServer, gearman_server: GearmanServer,
    workq_server: WorkqServer, redis_with_password: RedisServer,
) -> None:
    # Every client, admin and worker (sync ones connect when built: against real servers,
    # which the beanstalk, Gearman and Workq URLs' user info does not reach).
    urls = {
        "beanstalk": [f"beanstalk://user:{SECRET}@127.0.0.1:{beanstalk_server.port}"],
        "gearman": [f"gearman://user:{SECRET}@127.0.0.1:{gearman_server.port}"],
        "workq": [f"workq://user:{SECRET}@127.0.0.1:{workq_server.port}"],
        "redis": [f"redis://:{SECRET}@127.0.0.1:{redis_with_password.port}/2",
                  f"redis://default:{SECRET}@127.0.0.1:{redis_with_password.port}",
                  f"redis://127.0.0.1:{redis_with_password.port}/?password={SECRET}&db=1",
                  f"unix://{redis_with_password.unix_path}?password={SECRET}&db=3"],
    }
    for scheme, builders in BUILDERS.items():
        for url in urls[scheme]:
            for builder in builders:
                obj = builder(url)
                try:
                    _check_shown(obj)
                finally:
                    if not hasattr(obj, "aclose") and hasattr(obj, "close"):
                        obj.close()


def test_redis_password_argument_stays_out_of_reprs_and_errors(
    redis_with_password: RedisServer,
) -> None:
    with qless_client.Redis(redis_with_password.url, password=SECRET) as redis:
        assert redis.execute("PING") == "PONG"
        _check_shown(redis)
    with pytest.raises(InvalidAddress) as info:
        qless_client.Redis(f"redis://:x@127.0.0.1:{redis_with_password.port}", password=SECRET)
    assert SECRET not in shown(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("'redis://:pw@h:1/abc': bad", "'redis://:***@h:1/abc': bad"),
        ("redis://user:p@ss@h", "redis://user:***@h"),
        ("redis://pw@h", "redis://***@h"),
        ("('redis://:pw@h', 5)", "('redis://:***@h', 5)"),
        ('"redis://:it\'s@h"', '"redis://:***@h"'),
        ("unix:///s?db=1&password=pw", "unix:///s?db=1&password=***"),
        ("'redis://h?password=pw': unknown", "'redis://h?password=***': unknown"),
        ("redis://h?pass=a&db=1 x", "redis://h?pass=***&db=1 x"),
        ("redis://h?api_key=a;secret=b", "redis://h?api_key=***;secret=***"),
        ("redis://h?db=1&passwd=a", "redis://h?db=1&passwd=***"),
        ("redis://h:6379/0 and beanstalk://h", "redis://h:6379/0 and beanstalk://h"),
        ("user@example.org wrote a=b", "user@example.org wrote a=b"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_invalid_address_redacts_whatever_the_raiser_wrote() -> None:
    assert str(InvalidAddress(f"'redis://u:{SECRET}@h': no")) == "'redis://u:***@h': no"


@pytest.mark.parametrize(
    ("argv"),
    [
        ["qless", "queues", "--url", f"redis://:{SECRET}@127.0.0.1:1/abc"],
        ["qless", "queues", "--url", f"redis://127.0.0.1:1/?password={SECRET}&db=x"],
        ["qless", "queues", "--debug", "--url", f"redis://:{SECRET}@127.0.0.1:1/abc"],
        ["beanstalk", "stats", "--url", f"beanstalk://:{SECRET}@[::1"],
        ["beanstalk", "stats", "--debug", "--url", f"beanstalk://:{SECRET}@127.0.0.1:99999"],
        ["workq", "inspect", "queues", "--url", f"workq://:{SECRET}@127.0.0.1:0"],
        ["gearman", "status", "--url", f"gearman://:{SECRET}@[zz"],
    ],
    ids=["db", "query", "debug", "ipv6", "beanstalk-debug", "workq", "gearman"],
)
def test_cli_never_prints_the_secret(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "jobwire", *argv], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stderr + done.stdout
    assert "***" in done.stderr
