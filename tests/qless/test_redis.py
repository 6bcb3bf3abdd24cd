"""``Redis`` and ``AsyncRedis`` (asyncio and trio) against a real redis-server, and against fake
peers that send half a reply or garbage."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from jobwire import TCPAddress, UnixAddress
from jobwire.errors import (
    ConnectFailed,
    ConnectionLost,
    InvalidAddress,
    LocalProtocolError,
    OperationTimeout,
    RemoteProtocolError,
)
from qless_client import (
    AsyncRedis,
    AuthenticationError,
    BulkError,
    Push,
    QlessError,
    Redis,
    RedisError,
    Verbatim,
    parse_redis_address,
)
from tests.beanstalk.fakes import scripted_server
from tests.conftest import free_port
from tests.waiting import await_until

from .conftest import RedisServer, start_redis

SCRIPT = "redis.call('SET', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), #ARGV}"


# -- addresses -----------------------------------------------------------------------------------


def test_address_forms() -> None:
    tcp = TCPAddress("127.0.0.1", 6379)
    assert parse_redis_address("redis://127.0.0.1")[0] == tcp
    assert parse_redis_address("127.0.0.1")[0] == tcp
    assert parse_redis_address(("127.0.0.1", 6380))[0] == TCPAddress("127.0.0.1", 6380)
    assert parse_redis_address("h:7000")[0] == TCPAddress("h", 7000)
    assert parse_redis_address("h", 7001)[0] == TCPAddress("h", 7001)
    assert parse_redis_address("[::1]:7002")[0] == TCPAddress("::1", 7002)
    assert parse_redis_address("/run/redis.sock")[0] == UnixAddress("/run/redis.sock")
    address, options = parse_redis_address("redis://alice:p%40ss%3Aw@[::1]:7003/4")
    assert address == TCPAddress("::1", 7003)
    assert (options.username, options.password, options.db) == ("alice", "p@ss:w", 4)
    assert "p@ss" not in repr(options)
    _, options = parse_redis_address("redis://:secret@h/")
    assert (options.username, options.password, options.db) == (None, "secret", 0)
    _, options = parse_redis_address("redis://h?db=2&password=x&username=u")
    assert (options.username, options.password, options.db) == ("u", "x", 2)
    for url in ("unix:///tmp/r.sock?db=3&password=pw", "redis+unix:///tmp/r.sock?db=3&password=pw",
                "unix://:pw@/tmp/r.sock?db=3"):
        address, options = parse_redis_address(url)
        assert address == UnixAddress("/tmp/r.sock"), url
        assert (options.db, options.password) == (3, "pw"), url
    _, options = parse_redis_address("h", db=5, username="u", password="p", protocol=3)
    assert (options.db, options.username, options.password, options.protocol) == (5, "u", "p", 3)


@pytest.mark.parametrize(
    ("address", "kwargs", "error"),
    [
        ("http://h", {}, InvalidAddress),
        ("redis://h:99999", {}, InvalidAddress),
        ("redis://h/x", {}, InvalidAddress),
        ("redis://h/1?db=2", {}, InvalidAddress),
        ("redis://h?timeout=3", {}, InvalidAddress),
        ("redis://h#frag", {}, InvalidAddress),
        ("redis://user@h", {}, InvalidAddress),  # a username without a password
        ("redis://:pw@h", {"password": "other"}, InvalidAddress),
        ("redis://h/3", {"db": 3}, InvalidAddress),
        ("h", {"db": -1}, InvalidAddress),
        ("h", {"db": "1"}, TypeError),
        ("h", {"password": 5}, TypeError),
        (5, {}, TypeError),
        ("h", {"protocol": 4}, LocalProtocolError),
        ("h", {"client_name": "has space"}, LocalProtocolError),
        ("rediss://h:6380", {"ssl": False}, InvalidAddress),  # TLS asked, then refused
        ("h", {"ssl": "yes"}, TypeError),
    ],
)
def test_bad_addresses_are_refused_at_construction(
    address: Any, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        Redis(address, **kwargs)
    with pytest.raises(error):
        AsyncRedis(address, **kwargs)


def test_unreachable_server() -> None:
    with pytest.raises(ConnectFailed):
        Redis(("127.0.0.1", free_port()), timeout=2)


# -- the blocking client -------------------------------------------------------------------------


def test_round_trip(redis_url: str, key: str) -> None:
    with Redis(redis_url, client_name="jobwire-test") as redis:
        assert redis.execute("SET", key + "a", b"\x00\r\n\xff") == "OK"
        assert redis.execute("GET", key + "a") == b"\x00\r\n\xff"
        assert redis.execute("GET", key + "missing") is None
        assert redis.execute("INCRBY", key + "n", 5) == 5
        assert redis.execute("INCRBYFLOAT", key + "f", 1.5) == b"1.5"
        assert redis.execute("RPUSH", key + "l", "é", 1, 2.5) == 3
        assert redis.execute("LRANGE", key + "l", 0, -1) == ["é".encode(), b"1", b"2.5"]
        assert redis.execute("LRANGE", key + "nothing", 0, -1) == []
        assert redis.execute("CLIENT", "GETNAME") == b"jobwire-test"
        assert redis.execute("BLPOP", key + "empty", 0.2, wait=0.2) is None


def test_error_replies_are_typed_and_leave_the_connection_usable(redis_url: str, key: str) -> None:
    with Redis(redis_url) as redis:
        redis.execute("SET", key, "v")
        with pytest.raises(RedisError) as info:
            redis.execute("LPUSH", key, "x")
        assert info.value.code == "WRONGTYPE"
        assert str(info.value) == (
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        )
        with pytest.raises(RedisError) as info:
            redis.execute("NOSUCHCOMMAND", "a")
        assert info.value.code == "ERR" and "NOSUCHCOMMAND" in info.value.message
        with pytest.raises(LocalProtocolError):
            redis.execute("SUBSCRIBE", "channel")  # refused: nothing sent
        with pytest.raises(LocalProtocolError):
            redis.execute("SET", key, None)  # type: ignore[arg-type]
        assert redis.execute("PING") == "PONG"
        assert redis.connections == 1


def test_pipeline_of_10k_commands(redis_url: str, key: str) -> None:
    with Redis(redis_url) as redis:
        replies = redis.pipeline([("SET", f"{key}{i}", i) for i in range(10_000)])
        assert replies == ["OK"] * 10_000
        replies = redis.pipeline([("GET", f"{key}{i}") for i in range(10_000)])
        assert replies == [str(i).encode() for i in range(10_000)]
        assert redis.pipeline([("INCR", key + "n")] * 100, window=7) == list(range(1, 101))
        assert redis.pipeline([]) == []


def test_pipeline_errors_are_reported_with_every_result(redis_url: str, key: str) -> None:
    with Redis(redis_url) as redis:
        with pytest.raises(BulkError) as info:
            redis.pipeline([("SET", key, "v"), ("INCR", key), ("GET", key), ("NOPE",)])
        results = info.value.results
        assert results[0] == "OK" and results[2] == b"v"
        assert isinstance(results[1], RedisError) and results[1].code == "ERR"
        assert isinstance(results[3], RedisError)
        with pytest.raises(LocalProtocolError):  # validated before anything is sent
            redis.pipeline([("SET", key, "w"), ("SET", key, True)])
        assert redis.execute("GET", key) == b"v"
        with pytest.raises(LocalProtocolError):
            redis.pipeline([("PING",)], window=0)
        assert redis.execute("PING") == "PONG"


def test_a_16_mib_value(redis_server: RedisServer, key: str) -> None:
    body = bytes(range(256)) * (16 * 1024 * 1024 // 256)
    with Redis(redis_server.url) as redis:
        assert redis.execute("SET", key, body) == "OK"
        assert redis.execute("GET", key) == body


def test_max_bulk_against_the_real_server(redis_server: RedisServer, key: str) -> None:
    with Redis(redis_server.url, max_bulk=1024) as redis:
        redis.execute("SET", key, b"x" * 2048)
        with pytest.raises(RemoteProtocolError, match="max_bulk"):
            redis.execute("GET", key)
        assert redis.execute("STRLEN", key) == 2048  # a new connection
        assert redis.connections == 2


def test_reply_caps_against_the_real_server(redis_server: RedisServer, key: str) -> None:
    # One reply as a whole: values at every level, and bytes on the wire.
    with Redis(redis_server.url, max_reply_items=10, max_reply_bytes=200) as redis:
        redis.execute("RPUSH", key, *range(9))
        assert redis.execute("LRANGE", key, 0, -1) == [b"%d" % i for i in range(9)]  # 10 values
        redis.execute("RPUSH", key, 9)
        with pytest.raises(RemoteProtocolError, match="max_reply_items 10"):
            redis.execute("LRANGE", key, 0, -1)
        redis.execute("SET", key + "b", b"x" * 300)
        with pytest.raises(RemoteProtocolError, match="max_reply_bytes 200"):
            redis.execute("GET", key + "b")
        assert redis.execute("LLEN", key) == 10  # a new connection


def test_a_timeout_closes_the_connection_and_the_next_call_reopens_it(
    redis_server: RedisServer,
) -> None:
    with Redis(redis_server.url, timeout=0.2) as redis:
        with pytest.raises(OperationTimeout):
            redis.execute("DEBUG", "SLEEP", "0.5")
        assert redis.execute("ECHO", "mine", wait=1) == b"mine"  # never the late "OK"
        assert redis.connections == 2


def test_select_db(redis_server: RedisServer, key: str) -> None:
    with Redis(redis_server.url + "/3") as db3, Redis(redis_server.url, db=4) as db4, \
            Redis(redis_server.unix_url + "?db=3") as unix3:
        db3.execute("SET", key, "three")
        assert db4.execute("GET", key) is None
        assert unix3.execute("GET", key) == b"three"
        assert b"db=3" in db3.execute("CLIENT", "INFO")


# -- scripts -------------------------------------------------------------------------------------


def test_load_script_and_evalsha(redis_url: str, key: str) -> None:
    with Redis(redis_url) as redis:
        sha = redis.load_script(SCRIPT)
        assert sha == hashlib.sha1(SCRIPT.encode()).hexdigest()
        assert redis.evalsha(sha, [key], ["v", 2, 1.5]) == [b"v", 3]
        assert redis.evalsha(sha.upper(), (key,), (b"w",)) == [b"w", 1]
        with pytest.raises(RedisError) as info:
            redis.evalsha("0" * 40, [], [])
        assert info.value.code == "NOSCRIPT"
        with pytest.raises(RedisError) as info:
            redis.load_script("return +")
        assert "compiling" in info.value.message
        with pytest.raises(RedisError):
            redis.evalsha(redis.load_script("return redis.error_reply('BOOM no')"), [], [])
        with pytest.raises(LocalProtocolError):
            redis.evalsha(sha, key, [])  # a str is a sequence, but not of keys
        with pytest.raises(LocalProtocolError):
            redis.load_script(5)  # type: ignore[arg-type]


def test_noscript_after_script_flush_reloads_and_retries(
    fresh_redis: RedisServer, key: str
) -> None:
    with Redis(fresh_redis.url) as redis, Redis(fresh_redis.url) as admin:
        sha = redis.load_script(SCRIPT)
        admin.execute("SCRIPT", "FLUSH")
        assert admin.execute("SCRIPT", "EXISTS", sha) == [0]
        assert redis.evalsha(sha, [key], ["again"]) == [b"again", 1]
        assert admin.execute("SCRIPT", "EXISTS", sha) == [1]


def test_noscript_after_a_server_restart(fresh_redis: RedisServer, key: str) -> None:
    with Redis(fresh_redis.url) as redis:
        sha = redis.load_script(SCRIPT)
        fresh_redis.restart()
        with pytest.raises(ConnectionLost):
            redis.execute("PING")  # the old connection is gone with the old server
        assert redis.evalsha(sha, [key], ["after"]) == [b"after", 1]
        assert redis.connections == 2


# -- RESP3 against the real server ---------------------------------------------------------------


def test_resp3_replies(redis_server: RedisServer, key: str) -> None:
    pushes: list[Push] = []
    with Redis(redis_server.url, protocol=3, on_push=pushes.append) as redis:
        redis.execute("HSET", key + "h", "f", "v", "g", 1)
        assert redis.execute("HGETALL", key + "h") == {b"f": b"v", b"g": b"1"}
        assert redis.execute("CONFIG", "GET", "maxmemory-policy") == {
            b"maxmemory-policy": b"noeviction"
        }
        redis.execute("ZADD", key + "z", 1.25, "m")
        assert redis.execute("ZSCORE", key + "z", "m") == 1.25
        redis.execute("SADD", key + "s", "a", "b")
        assert redis.execute("SMEMBERS", key + "s") == {b"a", b"b"}
        assert redis.execute("GET", key + "none") is None
        assert redis.execute("DEBUG", "PROTOCOL", "true") is True
        assert redis.execute("DEBUG", "PROTOCOL", "false") is False
        assert redis.execute("DEBUG", "PROTOCOL", "null") is None
        assert redis.execute("DEBUG", "PROTOCOL", "double") == 3.141
        assert redis.execute("DEBUG", "PROTOCOL", "bignum") == 1234567999999999999999999999999999999
        assert redis.execute("DEBUG", "PROTOCOL", "map") == {0: False, 1: True, 2: False}
        assert redis.execute("DEBUG", "PROTOCOL", "set") == {0, 1, 2}
        verbatim = redis.execute("DEBUG", "PROTOCOL", "verbatim")
        assert isinstance(verbatim, Verbatim) and verbatim.format == "txt"
        assert verbatim == b"This is a verbatim\nstring"
        assert redis.execute("DEBUG", "PROTOCOL", "attrib") == (
            b"Some real reply following the attribute"
        )
        assert redis.execute("DEBUG", "PROTOCOL", "push") == (
            b"Some real reply following the push reply"
        )
        assert [p.kind for p in pushes] == ["server-cpu-usage"]
        hello = redis.execute("HELLO", "3")
        assert hello[b"proto"] == 3


def test_a_failing_push_callback_stalls_nothing(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(push: Push) -> None:
        raise RuntimeError("bug in the callback")

    with Redis(redis_server.url, protocol=3, on_push=broken) as redis:
        assert redis.pipeline([("DEBUG", "PROTOCOL", "push"), ("ECHO", "after")]) == [
            b"Some real reply following the push reply", b"after"
        ]
    assert "bug in the callback" in caplog.text


def test_resp2_gives_the_same_data_flat(redis_server: RedisServer, key: str) -> None:
    with Redis(redis_server.url) as redis:
        redis.execute("HSET", key, "f", "v")
        assert redis.execute("HGETALL", key) == [b"f", b"v"]
        assert redis.execute("DEBUG", "PROTOCOL", "double") == b"3.141"
        assert redis.execute("DEBUG", "PROTOCOL", "true") == 1


# -- credentials ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def auth_redis() -> Iterator[RedisServer]:
    """A server with ``requirepass sekret`` and an ACL user alice/wonderland."""
    server = start_redis("--requirepass", "sekret")
    with Redis(server.url, password="sekret") as admin:
        admin.execute("ACL", "SETUSER", "alice", "on", ">wonderland", "~*", "&*", "+@all")
    yield server
    server.stop()


@pytest.mark.parametrize("protocol", [2, 3])
def test_auth_on_connect(auth_redis: RedisServer, protocol: int) -> None:
    url = f"redis://:sekret@127.0.0.1:{auth_redis.port}/2"
    with Redis(url, protocol=protocol, client_name="named") as redis:
        assert redis.execute("ACL", "WHOAMI") == b"default"
        assert b" db=2 " in redis.execute("CLIENT", "INFO")
        assert redis.execute("CLIENT", "GETNAME") == b"named"
    url = f"redis://alice:wonderland@127.0.0.1:{auth_redis.port}"
    with Redis(url, protocol=protocol) as redis:
        assert redis.execute("ACL", "WHOAMI") == b"alice"
    with Redis(auth_redis.unix_path, username="alice", password="wonderland",
               protocol=protocol) as redis:
        assert redis.execute("ACL", "WHOAMI") == b"alice"


@pytest.mark.parametrize("protocol", [2, 3])
def test_wrong_credentials_fail_at_connect(auth_redis: RedisServer, protocol: int) -> None:
    with pytest.raises(AuthenticationError) as info:
        Redis(auth_redis.url, password="wrong", protocol=protocol)
    assert info.value.code == "WRONGPASS"
    with pytest.raises(AuthenticationError):
        Redis(auth_redis.url, username="alice", password="sekret", protocol=protocol)
    if protocol == 3:
        with pytest.raises(AuthenticationError) as info:
            Redis(auth_redis.url, protocol=3)  # HELLO without AUTH
        assert info.value.code == "NOAUTH"
    else:
        with Redis(auth_redis.url) as redis, pytest.raises(AuthenticationError) as info:
            redis.execute("PING")
        assert info.value.code == "NOAUTH"


def test_a_password_the_server_does_not_want(redis_server: RedisServer) -> None:
    with pytest.raises(AuthenticationError) as info:
        Redis(redis_server.url, password="unneeded")
    assert info.value.code == "ERR"


# -- servers that die or send garbage ------------------------------------------------------------


def test_server_killed_while_a_reply_is_outstanding(fresh_redis: RedisServer) -> None:
    with Redis(fresh_redis.url, timeout=10) as redis:
        assert redis.execute("PING") == "PONG"  # connected before the kill can land
        killer = threading.Timer(0.3, fresh_redis.kill)
        killer.start()
        with pytest.raises(ConnectionLost):
            redis.execute("DEBUG", "SLEEP", "5")
        # The reply's connection can close a moment before the listening socket does (the
        # process closes its descriptors one by one): wait until the process is gone, or a
        # connect in between succeeds and breaks (ConnectionLost, not ConnectFailed).
        killer.join()
        for _ in range(2):  # each call tries to connect again
            with pytest.raises(ConnectFailed):
                redis.execute("PING")
        fresh_redis.restart()
        assert redis.execute("PING") == "PONG"


def test_half_a_bulk_then_close() -> None:
    with scripted_server(b"$10\r\nhal") as port, Redis(("127.0.0.1", port), timeout=5) as redis, \
            pytest.raises(ConnectionLost, match="mid-reply"):
        redis.execute("GET", "k")


def test_garbage_from_the_server() -> None:
    with scripted_server(b"HTTP/1.1 400 Bad Request\r\n\r\n", close=False) as port, \
            Redis(("127.0.0.1", port), timeout=5) as redis, pytest.raises(RemoteProtocolError):
        redis.execute("GET", "k")


def test_a_pipeline_cut_short() -> None:
    with scripted_server(b"$1\r\nv\r\n$5\r\nhal", wait_for=b"c\r\n") as port, \
            Redis(("127.0.0.1", port), timeout=5) as redis:
        with pytest.raises(BulkError) as info:
            redis.pipeline([("GET", "a"), ("GET", "b"), ("GET", "c")])
        assert info.value.results[0] == b"v" and info.value.index == 1
        assert all(isinstance(r, ConnectionLost) for r in info.value.results[1:])
        assert isinstance(info.value, QlessError)


def test_a_silent_server_times_out() -> None:
    with scripted_server(b"", close=False) as port, \
            Redis(("127.0.0.1", port), timeout=0.3) as redis, pytest.raises(OperationTimeout):
        redis.execute("GET", "k")


# -- the async client (asyncio and trio) ---------------------------------------------------------


@pytest.mark.anyio
async def test_async_round_trip_and_sharing(redis_url: str, key: str) -> None:
    async with AsyncRedis(redis_url) as redis:
        assert await redis.execute("SET", key, "v") == "OK"
        assert await redis.execute("GET", key) == b"v"

        async def incr() -> None:
            await redis.execute("INCR", key + "n")

        async with anyio.create_task_group() as tg:
            for _ in range(200):
                tg.start_soon(incr)
        assert await redis.execute("GET", key + "n") == b"200"
        assert redis.connections == 1
        with pytest.raises(RedisError) as info:
            await redis.execute("INCR", key)
        assert info.value.code == "ERR"
        assert await redis.execute("PING") == "PONG"


@pytest.mark.anyio
async def test_async_pipeline_of_10k(redis_url: str, key: str) -> None:
    async with AsyncRedis(redis_url) as redis:
        assert await redis.pipeline([("SET", f"{key}{i}", i) for i in range(10_000)]) == (
            ["OK"] * 10_000
        )
        replies = await redis.pipeline([("GET", f"{key}{i}") for i in range(10_000)])
        assert replies == [str(i).encode() for i in range(10_000)]
        with pytest.raises(BulkError) as info:
            await redis.pipeline([("GET", f"{key}1"), ("INCRBY", f"{key}1", "x")])
        assert info.value.results[0] == b"1"


@pytest.mark.anyio
async def test_async_scripts_and_noscript(fresh_redis: RedisServer, key: str) -> None:
    async with AsyncRedis(fresh_redis.url) as redis:
        sha = await redis.load_script(SCRIPT)
        assert await redis.evalsha(sha, [key], ["a"]) == [b"a", 1]
        await redis.execute("SCRIPT", "FLUSH")
        assert await redis.evalsha(sha, [key], ["b"]) == [b"b", 1]
        fresh_redis.restart()
        with pytest.raises(ConnectionLost):
            await redis.execute("PING")
        assert await redis.evalsha(sha, [key], ["c"]) == [b"c", 1]
        assert redis.connections == 2


@pytest.mark.anyio
async def test_a_cancelled_callers_reply_goes_to_nobody(redis_server: RedisServer) -> None:
    async with AsyncRedis(redis_server.url) as redis:
        got: dict[str, Any] = {}

        async def slow() -> None:
            got["slow"] = await redis.execute("DEBUG", "SLEEP", "0.3")

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            # queued first: the server sleeps in it, and what follows waits behind it
            await await_until(lambda: redis._session.in_flight == 1, what="DEBUG SLEEP queued")
            with anyio.move_on_after(0.05) as scope:
                await redis.execute("ECHO", "for the cancelled caller")
            assert scope.cancelled_caught
            got["next"] = await redis.execute("ECHO", "for the next caller")
        assert got == {"slow": "OK", "next": b"for the next caller"}
        assert redis.connections == 1


@pytest.mark.anyio
async def test_async_timeout_drops_the_late_reply(redis_server: RedisServer) -> None:
    async with AsyncRedis(redis_server.url, timeout=0.1) as redis:
        with pytest.raises(OperationTimeout):
            await redis.execute("DEBUG", "SLEEP", "0.3")
        assert await redis.execute("ECHO", "mine", wait=1) == b"mine"
        assert redis.connections == 1


@pytest.mark.anyio
async def test_an_abandoned_blocking_command_closes_the_connection(
    redis_server: RedisServer, key: str
) -> None:
    async with AsyncRedis(redis_server.url) as redis:
        with anyio.move_on_after(0.1):
            await redis.execute("BLPOP", key, 0, wait=None)
        # The server would hold every later call behind the BLPOP: a new connection instead.
        assert await redis.execute("PING") == "PONG"
        assert redis.connections == 2
        assert await redis.execute("LLEN", key) == 0


@pytest.mark.anyio
async def test_async_resp3_auth_and_select(auth_redis: RedisServer, key: str) -> None:
    pushes: list[Push] = []
    async with AsyncRedis(auth_redis.url, username="alice", password="wonderland", db=5,
                          protocol=3, on_push=pushes.append) as redis:
        assert await redis.execute("ACL", "WHOAMI") == b"alice"
        await redis.execute("HSET", key, "f", "v")
        assert await redis.execute("HGETALL", key) == {b"f": b"v"}
        assert b" db=5 " in await redis.execute("CLIENT", "INFO")
        await redis.execute("DEBUG", "PROTOCOL", "push")
        assert len(pushes) == 1
    redis = AsyncRedis(auth_redis.url, password="wrong")
    with pytest.raises(AuthenticationError):
        await redis.connect()
    with pytest.raises(AuthenticationError):  # each call tries again, and fails the same way
        await redis.execute("PING")
    await redis.aclose()
    with pytest.raises(ConnectionLost):
        await redis.execute("PING")


@pytest.mark.anyio
async def test_async_server_killed_mid_call(fresh_redis: RedisServer) -> None:
    async with AsyncRedis(fresh_redis.url) as redis:
        assert await redis.execute("PING") == "PONG"
        killer = threading.Timer(0.3, fresh_redis.kill)
        killer.start()
        with pytest.raises(ConnectionLost):
            await redis.execute("DEBUG", "SLEEP", "5")
        # As in the sync test: the process must be gone before the next connect.
        await anyio.to_thread.run_sync(killer.join)
        for _ in range(2):  # each call tries to connect again
            with pytest.raises(ConnectFailed):
                await redis.execute("PING")
        fresh_redis.restart()
        assert await redis.execute("PING") == "PONG"


@pytest.mark.anyio
async def test_async_fake_peers() -> None:
    with scripted_server(b"*2\r\n$3\r\nfoo\r\n$10\r\nhal") as port:
        async with AsyncRedis(("127.0.0.1", port), timeout=5) as redis:
            with pytest.raises(ConnectionLost, match="mid-reply"):
                await redis.execute("LRANGE", "k", 0, -1)
    with scripted_server(b"$3\r\nabcXY", close=False) as port:
        async with AsyncRedis(("127.0.0.1", port), timeout=5) as redis:
            with pytest.raises(RemoteProtocolError, match="not followed by CRLF"):
                await redis.execute("GET", "k")
