"""The jobwire pytest plugin as a user meets it: a fresh project whose tests use nothing but the
plugin's fixtures, run by pytest in a subprocess, for each system and backend."""

from __future__ import annotations

import pytest

import qless_client
from jobwire.testing import (
    free_port,
    start_beanstalk,
    start_gearman,
    start_redis,
    start_workq,
    unavailable,
    workq_binary,
)
from jobwire.testing._process import find_binary

from .conftest import Inner

pytestmark = pytest.mark.slow  # every test runs pytest in a subprocess, with its own servers

ANYIO = '''
import pytest

KIND, URL = {kind!r}, {url!r}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


def check(server, scheme):
    assert server.kind == KIND
    if KIND in ("external", "container"):
        assert server.proc is None
    else:
        assert server.proc.poll() is None
    if KIND == "external":
        assert server.url == URL
    else:
        assert server.url == f"{{scheme}}://{{server.host}}:{{server.port}}"
'''

#: Per system: the server, a sync and an async client doing a round trip (4 tests).
BASIC = {
    "beanstalk": '''

def test_server(beanstalk_server):
    check(beanstalk_server, "beanstalk")


def test_sync(beanstalk_client, beanstalk_tube):
    assert beanstalk_client.list_tubes_watched() == [beanstalk_tube]
    assert beanstalk_client.list_tube_used() == beanstalk_tube
    job_id = beanstalk_client.put(b"sync")
    job = beanstalk_client.reserve(wait=5)
    assert (job.id, job.body) == (job_id, b"sync")
    beanstalk_client.delete(job)


@pytest.mark.anyio
async def test_async(async_beanstalk_client, beanstalk_tube):
    assert await async_beanstalk_client.list_tubes_watched() == [beanstalk_tube]
    assert await async_beanstalk_client.list_tube_used() == beanstalk_tube
    job_id = await async_beanstalk_client.put(b"async")
    job = await async_beanstalk_client.reserve(wait=5)
    assert (job.id, job.body) == (job_id, b"async")
    await async_beanstalk_client.delete(job)
''',
    "gearman": '''
from gearman_client import Admin


def test_server(gearman_server):
    check(gearman_server, "gearman")


def queued(server, function):
    with Admin(server.url) as admin:
        return [row.queued for row in admin.status() if row.function == function]


def test_sync(gearman_client, gearman_server, gearman_function):
    gearman_client.submit_background(gearman_function, b"sync")
    assert queued(gearman_server, gearman_function) == [1]


@pytest.mark.anyio
async def test_async(async_gearman_client, gearman_server, gearman_function):
    await async_gearman_client.submit_background(gearman_function, b"async")
    assert queued(gearman_server, gearman_function) == [1]
''',
    "workq": '''

def test_server(workq_server):
    check(workq_server, "workq")


def test_sync(workq_client, workq_name):
    job_id = workq_client.add(workq_name, b"sync", ttr=60, ttl=600)
    leased = workq_client.lease(workq_name, wait=5)
    assert (leased.job_id, leased.payload) == (job_id, b"sync")
    workq_client.complete(job_id, b"done")


@pytest.mark.anyio
async def test_async(async_workq_client, workq_name):
    job_id = await async_workq_client.add(workq_name, b"async", ttr=60, ttl=600)
    leased = await async_workq_client.lease(workq_name, wait=5)
    assert (leased.job_id, leased.payload) == (job_id, b"async")
    await async_workq_client.complete(job_id, b"done")
''',
    "qless": '''

def test_server(redis_server):
    check(redis_server, "redis")


def test_sync(qless_client, qless_queue):
    jid = qless_client.queue(qless_queue).put("app.Job", {"n": 1})
    job = qless_client.queue(qless_queue).pop()
    assert job is not None and job.jid == jid
    job.complete()


@pytest.mark.anyio
async def test_async(async_qless_client, qless_queue):
    queue = async_qless_client.queue(qless_queue)
    jid = await queue.put("app.Job", {"n": 2})
    job = await queue.pop()
    assert job is not None and job.jid == jid
    await job.complete()
''',
}

#: Per system: two tests that each check they start from nothing and leave a job behind; the
#: second passes only if it does not see the first one's job (2 tests).
FRESH = {
    "beanstalk": '''
def leave_a_job(client, tube):
    assert client.stats_tube(tube)["current-jobs-ready"] == 0
    client.put(b"left behind")
    assert client.stats_tube(tube)["current-jobs-ready"] == 1


def test_first(beanstalk_client, beanstalk_tube):
    leave_a_job(beanstalk_client, beanstalk_tube)


def test_second(beanstalk_client, beanstalk_tube):
    leave_a_job(beanstalk_client, beanstalk_tube)
''',
    "gearman": '''
from gearman_client import Admin


def leave_a_job(client, server, function):
    with Admin(server.url) as admin:
        assert [row for row in admin.status() if row.function == function] == []
        client.submit_background(function, b"left behind")
        assert [row.queued for row in admin.status() if row.function == function] == [1]


def test_first(gearman_client, gearman_server, gearman_function):
    leave_a_job(gearman_client, gearman_server, gearman_function)


def test_second(gearman_client, gearman_server, gearman_function):
    leave_a_job(gearman_client, gearman_server, gearman_function)
''',
    "workq": '''
import pytest
from workq_client import NotFound


def leave_a_job(client, name):
    with pytest.raises(NotFound):
        client.inspect_queue(name)
    client.add(name, b"left behind", ttr=60, ttl=600)
    assert client.inspect_queue(name).ready_len == 1


def test_first(workq_client, workq_name):
    leave_a_job(workq_client, workq_name)


def test_second(workq_client, workq_name):
    leave_a_job(workq_client, workq_name)
''',
    # "shared" is the same name in both tests: only the flush keeps them apart.
    "qless": '''
def leave_jobs(client, queue):
    assert client.queue("shared").length() == 0
    assert client.queue(queue).length() == 0
    client.queue("shared").put("app.Job", {})
    client.queue(queue).put("app.Job", {})


def test_first(qless_client, qless_queue):
    leave_jobs(qless_client, qless_queue)


def test_second(qless_client, qless_queue):
    leave_jobs(qless_client, qless_queue)
''',
}

SYSTEM_NAMES = {"beanstalk": "beanstalk", "gearman": "gearman", "workq": "workq",
                "qless": "redis"}
BINARIES = {"beanstalk": "beanstalkd", "gearman": "gearmand", "qless": "redis-server"}


def files(system: str, kind: str, url: str = "", *, fresh: bool = True) -> dict[str, str]:
    chosen = {"test_basic": ANYIO.format(kind=kind, url=url) + BASIC[system]}
    if fresh:
        chosen["test_fresh"] = FRESH[system]
    return chosen


@pytest.mark.parametrize("system", list(BASIC))
def test_bundled_backend(inner: Inner, system: str) -> None:
    """The default: bundled servers (redis-server for qless), each test with its own state."""
    if system == "qless" and find_binary("redis-server") is None:
        unavailable("redis-server is not installed")
    kind = "redis-server" if system == "qless" else "bundled"
    result = inner(files=files(system, kind))
    result.assert_outcomes(passed=6)
    assert "jobwire servers:" not in result.stdout.str()  # the default says nothing


@pytest.mark.real_server
@pytest.mark.parametrize("system", list(BINARIES))
def test_binary_backend(inner: Inner, system: str) -> None:
    """``--jobwire-backend=binary``: the real beanstalkd, gearmand and redis-server."""
    if find_binary(BINARIES[system]) is None:
        unavailable(f"{BINARIES[system]} is not installed")
    result = inner("--jobwire-backend=binary", files=files(system, BINARIES[system]))
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        ["jobwire servers: beanstalk=binary, gearman=binary, workq=binary, redis=binary"]
    )


def test_binary_backend_without_a_workq_server(inner: Inner) -> None:
    """Workq's real server is packaged nowhere: with none on PATH the tests skip and say why,
    and under JOBWIRE_REQUIRE_REAL_SERVERS=1 they fail with the same words."""
    if workq_binary() is not None:
        pytest.skip("a workq-server is on PATH here")  # then test_binary_workq runs it
    skipped = inner("--jobwire-backend=binary", files=files("workq", "workq-server"))
    skipped.assert_outcomes(skipped=6)
    skipped.stdout.fnmatch_lines(["SKIPPED *workq-server is not on PATH*"])
    failed = inner("--jobwire-backend=binary", env={"JOBWIRE_REQUIRE_REAL_SERVERS": "1"})
    failed.assert_outcomes(errors=6)
    failed.stdout.fnmatch_lines(
        ["*workq-server is not on PATH*(and JOBWIRE_REQUIRE_REAL_SERVERS=1)*"]
    )


@pytest.mark.real_server
def test_binary_workq(inner: Inner) -> None:
    """A workq-server on PATH is the binary backend's Workq server."""
    if workq_binary() is None:
        pytest.skip("no workq-server on PATH (the Go server is not packaged)")
    inner("--jobwire-backend=binary", files=files("workq", "workq-server")).assert_outcomes(
        passed=6
    )


def test_backend_per_system(inner: Inner) -> None:
    """``binary,workq=bundled``: the real beanstalkd, and the bundled Workq server."""
    if find_binary("beanstalkd") is None:
        unavailable("beanstalkd is not installed")
    result = inner("--jobwire-backend=binary,workq=bundled", files={
        "test_kinds": """
            def test_kinds(beanstalk_server, workq_server):
                assert (beanstalk_server.kind, workq_server.kind) == ("beanstalkd", "bundled")
        """})
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["jobwire servers: beanstalk=binary, *workq=bundled*"])


# -- external -----------------------------------------------------------------------------------


@pytest.mark.parametrize("system", ["beanstalk", "gearman", "workq"])
def test_external_backend(inner: Inner, system: str) -> None:
    """``external`` with the URL of a server this test started: the plugin starts nothing,
    uses that server, and the unique names keep the tests apart."""
    start = {"beanstalk": start_beanstalk, "gearman": start_gearman, "workq": start_workq}
    server = start[system]()
    try:
        result = inner("--jobwire-backend=external", f"--jobwire-{system}-url={server.url}",
                       files=files(system, "external", server.url))
        result.assert_outcomes(passed=6)
        result.stdout.fnmatch_lines([f"jobwire servers: *{system}=external*"])
    finally:
        server.stop()


def test_external_redis_is_never_flushed(inner: Inner) -> None:
    """An external Redis keeps what it holds: the qless fixtures do not flush it (a unique
    queue name is the isolation), and work in the database the URL names."""
    server = start_redis()
    url = f"{server.url}/3"
    try:
        with qless_client.Client(url) as client:
            client.queue("keep").put("app.Job", {})
        result = inner(f"--jobwire-redis-url={url}", files={
            **files("qless", "external", url, fresh=False),
            "test_kept": """
                def test_kept(qless_client, qless_queue):
                    assert qless_client.queue("keep").length() == 1
                    assert qless_client.queue(qless_queue).length() == 0
            """})
        result.assert_outcomes(passed=5)
        with qless_client.Client(url) as client:
            assert client.queue("keep").length() == 1
    finally:
        server.stop()


def test_external_url_from_the_environment(inner: Inner) -> None:
    """JOBWIRE_BEANSTALK_URL alone makes beanstalk external; the other systems stay bundled."""
    server = start_beanstalk()
    try:
        result = inner(env={"JOBWIRE_BEANSTALK_URL": server.url}, files={"test_env": f"""
            def test_env(beanstalk_server, workq_server):
                assert (beanstalk_server.kind, beanstalk_server.url) == ("external", {server.url!r})
                assert workq_server.kind == "bundled"
        """})
        result.assert_outcomes(passed=1)
    finally:
        server.stop()


def test_external_server_that_does_not_answer(inner: Inner) -> None:
    """A URL given on purpose where nothing answers fails the tests, naming the URL."""
    url = f"beanstalk://127.0.0.1:{free_port()}"
    result = inner(f"--jobwire-beanstalk-url={url}", files=files("beanstalk", "external", url,
                                                                 fresh=False))
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines([f"*--jobwire-beanstalk-url {url}: the server does not answer*"])


def test_external_without_a_url_skips(inner: Inner) -> None:
    result = inner("--jobwire-backend=external", files=files("gearman", "external", fresh=False))
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["SKIPPED *no gearman server given (pass --jobwire-gearman-url"
                                 " URL or set JOBWIRE_GEARMAN_URL)"])


# -- container ----------------------------------------------------------------------------------


def docker_answers() -> bool:
    """Whether a Docker engine answers (asked with docker, testcontainers' own dependency)."""
    try:
        import docker

        docker.from_env().ping()
    except Exception:
        return False
    return True


def test_container_backend(inner: Inner) -> None:
    """``container`` runs the servers with testcontainers; where no Docker engine answers (as
    on the machine this was written on) the tests skip and ``-rs`` says so, and under
    JOBWIRE_REQUIRE_REAL_SERVERS=1 they fail with the same words."""
    result = inner("--jobwire-backend=container", files=files("beanstalk", "container",
                                                              fresh=False))
    if docker_answers():
        result.assert_outcomes(passed=4)
        return
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(
        ["SKIPPED * --jobwire-backend=container: no Docker engine answers (*); start Docker*"]
    )
    failed = inner("--jobwire-backend=container", env={"JOBWIRE_REQUIRE_REAL_SERVERS": "1"})
    failed.assert_outcomes(errors=4)
    failed.stdout.fnmatch_lines(["*no Docker engine answers*(and JOBWIRE_REQUIRE_REAL_SERVERS=1)*"])


def test_container_workq_needs_an_image(inner: Inner) -> None:
    result = inner("--jobwire-backend=container", files=files("workq", "container", fresh=False))
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["SKIPPED *workq has no published server image; give one with "
                                 "--jobwire-workq-image or JOBWIRE_WORKQ_IMAGE"])
