"""``ClientPool`` of each package, against the real servers (beanstalkd, gearmand, redis-server
for qless) and the bundled Workq server (the real one is not packaged), each test on a server
of its own (started by :mod:`jobwire.testing` on a free port) so that the server's count of
connections is the pool's alone.

What is checked, for each of the four: 16 threads putting through a pool of 4 land every job
and never hold more than 4 connections (counted by the server: beanstalk ``stats``, Gearman's
admin ``workers``, Workq ``inspect server``, Redis ``CLIENT LIST``); a checkout waits at the
bound and times out with ``PoolTimeout``; a server killed and started again on the same port
costs the pool its broken client, not a failed call; a client whose block raised a connection
error is closed and not handed out again; ``close()`` closes every connection; a child process
after ``fork`` opens its own connection and leaves the parent's alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire.errors import (
    ConnectFailed,
    ConnectionLost,
    InvalidAddress,
    JobwireConnectionError,
    OperationTimeout,
    PoolTimeout,
)
from jobwire.testing import (
    spawn_redis,
    start_beanstalk,
    start_gearman,
    start_redis,
    start_workq,
)

from .waiting import wait_until

SIZE = 4
THREADS = 16
PUTS = 20  #: per thread


# -- one adapter per system ---------------------------------------------------------------------


class Observer:
    """One connection of its own to the server, for counting (it counts itself: subtracted)."""

    def __init__(self, connections: Callable[[], int], landed: Callable[[str], int],
                 close: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._connections, self._landed, self._close = connections, landed, close

    def connections(self) -> int:
        """Connections the server holds, besides this one."""
        with self._lock:
            return self._connections() - 1

    def landed(self, key: str) -> int:
        """Jobs waiting in the tube, function or queue ``key``."""
        with self._lock:
            return self._landed(key)

    def close(self) -> None:
        self._close()


@dataclass
class System:
    """How a test reaches one system: its server, its pool, one producer call, its counts."""

    name: str
    start: Callable[[int | None], Any]  #: a server (on this port, or a free one)
    pool: Callable[..., Any]  #: ClientPool(url, **options)
    put: Callable[[Any, str, int], object]  #: one producer call through a pool or a client
    observe: Callable[[Any], Observer]


def _beanstalk_observer(server: Any) -> Observer:
    client = beanstalk_client.Client(server.url)

    def landed(tube: str) -> int:
        try:
            return client.stats_tube(tube)["current-jobs-ready"]
        except beanstalk_client.NotFound:
            return 0

    return Observer(lambda: client.stats()["current-connections"], landed, client.close)


def _gearman_observer(server: Any) -> Observer:
    admin = gearman_client.Admin(server.url)

    def landed(function: str) -> int:
        return sum(s.queued for s in admin.status() if s.function == function)

    return Observer(lambda: len(admin.workers()), landed, admin.close)


def _workq_observer(server: Any) -> Observer:
    client = workq_client.Client(server.url)

    def landed(name: str) -> int:
        try:
            return client.inspect_queue(name).ready_len
        except workq_client.NotFound:
            return 0

    return Observer(lambda: client.inspect_server().active_clients, landed, client.close)


def _qless_observer(server: Any) -> Observer:
    redis = qless_client.Redis(server.url)
    qless = qless_client.Client(redis)

    def connections() -> int:
        listing = redis.execute("CLIENT", "LIST")
        text = listing.decode() if isinstance(listing, bytes) else str(listing)
        return len([line for line in text.splitlines() if line.strip()])

    return Observer(connections, lambda queue: qless.queue(queue).length(), redis.close)


def _put_beanstalk(target: Any, tube: str, i: int) -> object:
    if isinstance(target, beanstalk_client.Client):
        target.use(tube)
    return target.put(b"job %d" % i, **({} if isinstance(target, beanstalk_client.Client)
                                         else {"tube": tube}))


def _put_gearman(target: Any, function: str, i: int) -> object:
    return target.submit_background(function, b"job %d" % i)


def _put_workq(target: Any, name: str, i: int) -> object:
    return target.add(name, b"job %d" % i)


def _put_qless(target: Any, queue: str, i: int) -> object:
    if isinstance(target, qless_client.Client):
        return target.queue(queue).put("app.Job", {"i": i})
    return target.put(queue, "app.Job", {"i": i})


SYSTEMS = [
    pytest.param(System("beanstalk", lambda port: start_beanstalk("beanstalkd", port=port),
                        beanstalk_client.ClientPool, _put_beanstalk, _beanstalk_observer),
                 id="beanstalkd", marks=pytest.mark.real_server),
    pytest.param(System("gearman", lambda port: start_gearman("gearmand", port),
                        gearman_client.ClientPool, _put_gearman, _gearman_observer),
                 id="gearmand", marks=pytest.mark.real_server),
    pytest.param(System("workq", lambda port: start_workq(port), workq_client.ClientPool,
                        _put_workq, _workq_observer), id="workq-bundled"),
    # Started once per test; Served.start_again restarts it on its port and socket.
    pytest.param(System("qless", lambda port: start_redis(), qless_client.ClientPool,
                        _put_qless, _qless_observer), id="redis-server"),
]


class Served:
    """A server of the test's own, which the test may kill and start again on its port."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.server = system.start(None)
        self.port: int = self.server.port
        self.url: str = self.server.url
        self.observer: Observer | None = system.observe(self.server)
        self.key = f"pool-{uuid.uuid4().hex[:12]}"  # the tube, function or queue

    @property
    def seen(self) -> Observer:
        assert self.observer is not None, "the server is down"
        return self.observer

    def kill(self) -> None:
        """SIGKILL, as a crash: the kernel closes every connection."""
        if self.observer is not None:
            self.observer.close()
            self.observer = None
        proc = self.server.proc
        proc.kill()
        proc.wait()

    def start_again(self) -> None:
        """The same server on the same port (empty: jobs were not persisted)."""
        if self.system.name == "qless":
            self.server.proc = spawn_redis(self.server.args, self.port)
        else:
            self.server = self.system.start(self.port)
        self.observer = self.system.observe(self.server)

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.close()
        self.server.stop()


@pytest.fixture(params=SYSTEMS)
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    served = Served(request.param)
    try:
        yield served
    finally:
        served.stop()


@contextlib.contextmanager
def pooled(served: Served, **options: Any) -> Iterator[Any]:
    pool = served.system.pool(served.url, **options)
    try:
        yield pool
    finally:
        pool.close()


# -- the tests ----------------------------------------------------------------------------------


def test_sixteen_threads_share_four_connections_and_every_job_lands(served: Served) -> None:
    system, seen, key = served.system, served.seen, served.key
    assert seen.connections() == 0
    peak = 0
    peak_lock = threading.Lock()
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def produce() -> None:
        nonlocal peak
        try:
            start.wait()
            for i in range(PUTS):
                system.put(pool, key, i)
                now = seen.connections()  # sampled by every thread after every put
                with peak_lock:
                    peak = max(peak, now)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with pooled(served, size=SIZE) as pool:
        assert pool.stats.opened == 0  # lazy: nothing before the first call
        threads = [threading.Thread(target=produce) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert seen.landed(key) == THREADS * PUTS
        assert 1 <= peak <= SIZE
        stats = pool.stats
        assert stats.opened <= SIZE and stats.discarded == 0
        assert (stats.in_use, stats.waiting) == (0, 0)
        assert seen.connections() == stats.idle == stats.opened
    wait_until(lambda: seen.connections() == 0, what="the pool's connections closed")


def test_a_checkout_waits_at_the_bound_and_times_out(served: Served) -> None:
    system, seen, key = served.system, served.seen, served.key
    with pooled(served, size=2, checkout_timeout=0.05) as pool, contextlib.ExitStack() as held:
        first = held.enter_context(pool.client())
        second = held.enter_context(pool.client())
        assert first is not second
        assert (pool.stats.in_use, pool.stats.idle) == (2, 0)
        with pytest.raises(PoolTimeout) as info:
            system.put(pool, key, 0)
        assert isinstance(info.value, OperationTimeout)
        assert "all 2 clients" in str(info.value)
        assert seen.landed(key) == 0
        # Connected, nothing sent yet: the server counts them once it has accepted them.
        wait_until(lambda: seen.connections() == 2, what="the two connections accepted")

        # A caller with time to wait gets the first client given back.
        pool.checkout_timeout = 60.0
        done = threading.Event()

        def put() -> None:
            system.put(pool, key, 1)
            done.set()

        waiter = threading.Thread(target=put)
        waiter.start()
        wait_until(lambda: pool.stats.waiting == 1, what="the put waiting for a client")
        assert not done.is_set()
        held.close()  # both clients back: the waiter takes one
        waiter.join()
        assert done.is_set()
        assert seen.landed(key) == 1 and pool.stats.opened == 2


def test_a_client_that_raised_a_connection_error_is_not_reused(served: Served) -> None:
    seen = served.seen
    with pooled(served, size=2) as pool:
        with pytest.raises(ConnectionLost), pool.client() as client:
            failed = client
            raise ConnectionLost("the caller's call failed")
        assert (pool.stats.discarded, pool.stats.idle) == (1, 0)
        wait_until(lambda: seen.connections() == 0, what="the failed client's connection closed")

        with pytest.raises(ValueError), pool.client() as client:  # not a connection error
            kept = client
            raise ValueError("the caller's own bug")
        assert kept is not failed
        with pool.client() as client:
            assert client is kept
        served.system.put(pool, served.key, 0)
        assert pool.stats.opened == 2 and seen.connections() == 1


def test_an_idle_client_of_a_restarted_server_is_replaced(served: Served) -> None:
    system = served.system
    with pooled(served, size=2) as pool:
        system.put(pool, served.key, 0)
        assert pool.stats.idle == 1
        served.kill()
        served.start_again()
        system.put(pool, served.key, 1)  # the dead idle client never shows
        stats = pool.stats
        assert (stats.opened, stats.discarded, stats.idle) == (2, 1, 1)
        assert served.seen.landed(served.key) == 1
        assert served.seen.connections() == 1


def test_a_client_in_use_when_the_server_dies_is_not_reused(served: Served) -> None:
    system = served.system
    with pooled(served, size=2) as pool:
        system.put(pool, served.key, 0)
        with pytest.raises(JobwireConnectionError), pool.client() as client:
            broken = client
            served.kill()
            system.put(client, served.key, 1)
        assert (pool.stats.discarded, pool.stats.idle, pool.stats.in_use) == (1, 0, 0)
        served.start_again()
        with pool.client() as client:
            assert client is not broken
            system.put(client, served.key, 2)
        assert served.seen.landed(served.key) == 1
        assert served.seen.connections() == 1


def test_a_call_while_the_server_is_down_waits_for_it_with_back_off(served: Served) -> None:
    system = served.system
    with pooled(served, size=2, checkout_timeout=0.05) as pool:
        system.put(pool, served.key, 0)
        served.kill()
        with pytest.raises(ConnectFailed):  # its timeout is too short to see the server back
            system.put(pool, served.key, 1)
        failures = pool.stats.connect_failures
        assert failures >= 1 and pool.stats.in_use == 0

        pool.checkout_timeout = 60.0
        result: list[object] = []
        waiter = threading.Thread(target=lambda: result.append(system.put(pool, served.key, 2)))
        waiter.start()
        wait_until(lambda: pool.stats.connect_failures > failures,
                   what="the put trying to connect to the stopped server")
        served.start_again()
        waiter.join()
        assert len(result) == 1
        assert served.seen.landed(served.key) == 1
        assert pool.stats.idle == 1 and served.seen.connections() == 1


def test_close_closes_every_connection(served: Served) -> None:
    seen = served.seen
    pool = served.system.pool(served.url, size=SIZE)
    with pool, pool.client() as last:
        with contextlib.ExitStack() as rest:
            others = [rest.enter_context(pool.client()) for _ in range(SIZE - 1)]
            assert len({id(c) for c in [last, *others]}) == SIZE
            wait_until(lambda: seen.connections() == SIZE, what="every connection accepted")
        assert pool.stats.idle == SIZE - 1
        pool.close()
        assert pool.closed and pool.stats.idle == 0
        wait_until(lambda: seen.connections() == 1, what="the idle connections closed")
        served.system.put(last, served.key, 0)  # still the caller's until it comes back
    wait_until(lambda: seen.connections() == 0, what="the last connection closed")
    assert pool.stats.in_use == 0
    with pytest.raises(ConnectionLost, match="the pool is closed"):
        served.system.put(pool, served.key, 1)
    assert seen.landed(served.key) == 1


def test_a_forked_child_opens_its_own_connection(served: Served) -> None:
    system, seen, key = served.system, served.seen, served.key
    with pooled(served, size=2) as pool:
        system.put(pool, key, 0)
        with pool.client() as client:
            parents = client
        readable, writable = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child, reporting through the pipe
            report: dict[str, object] = {}
            try:
                report["before"] = pool.stats.opened
                system.put(pool, key, 1)
                with pool.client() as client:
                    report["same"] = client is parents
                report["opened"] = pool.stats.opened
            except BaseException as exc:
                report["error"] = repr(exc)
            finally:
                os.write(writable, json.dumps(report).encode())
                os._exit(0)
        os.close(writable)
        with os.fdopen(readable, "rb") as pipe:
            report = json.loads(pipe.read())
        os.waitpid(pid, 0)
        assert report == {"before": 0, "opened": 1, "same": False}
        # The parent's connection is untouched by the child closing its copy.
        system.put(pool, key, 2)
        with pool.client() as client:
            assert client is parents
        assert (pool.stats.opened, pool.stats.discarded) == (1, 0)
        assert seen.landed(key) == 3
        wait_until(lambda: seen.connections() == 1, what="the child's connection closed")


@pytest.mark.parametrize("pool_class", [beanstalk_client.ClientPool, gearman_client.ClientPool,
                                        workq_client.ClientPool, qless_client.ClientPool])
def test_bad_arguments_fail_where_they_are_given(pool_class: Any) -> None:
    with pytest.raises(ValueError, match="size must be >= 1"):
        pool_class("127.0.0.1:1", size=0)
    with pytest.raises(TypeError, match="size is an int"):
        pool_class("127.0.0.1:1", size=2.5)
    with pytest.raises(ValueError, match="checkout_timeout must be >= 0"):
        pool_class("127.0.0.1:1", checkout_timeout=-1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeuot'"):
        pool_class("127.0.0.1:1", timeuot=3)
    with pytest.raises(InvalidAddress):
        pool_class("127.0.0.1:99999")
    pool = pool_class("127.0.0.1:1", size=3)  # nothing is opened yet: no error
    assert repr(pool).endswith(" size=3 idle=0 in_use=0>")
    pool.close()
