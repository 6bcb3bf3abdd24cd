"""The pytest hooks and fixtures of ``jobwire.testing`` (registered through the package, which
the ``pytest11`` entry point names): command-line and ini options, one server per system for the
session, and per-test clients with state of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from ._backends import (
    SYSTEMS,
    Settings,
    provide_beanstalk,
    provide_gearman,
    provide_redis,
    provide_workq,
)
from ._servers import BeanstalkServer, GearmanServer, RedisServer, WorkqServer, unique_name

if TYPE_CHECKING:
    import beanstalk_client
    import gearman_client
    import qless_client
    import workq_client

__all__ = [
    "SETTINGS",
    "_async_beanstalk_client",
    "_async_gearman_client",
    "_async_qless_client",
    "_async_workq_client",
    "_beanstalk_client",
    "beanstalk_server",
    "beanstalk_tube",
    "_gearman_client",
    "gearman_function",
    "gearman_server",
    "jobwire_settings",
    "pytest_addoption",
    "pytest_configure",
    "pytest_report_header",
    "_qless_client",
    "qless_queue",
    "redis_server",
    "_workq_client",
    "workq_name",
    "workq_server",
]

#: Where :func:`pytest_configure` keeps the session's :class:`Settings`.
SETTINGS = pytest.StashKey[Settings]()

_HELP_BACKEND = (
    "where the jobwire fixtures' servers come from: bundled (default: the bundled servers as "
    "subprocesses; redis-server for qless), binary (beanstalkd, gearmand, workq-server, "
    "redis-server from PATH), container (testcontainers; needs Docker) or external (the "
    "--jobwire-SYSTEM-url servers); per system: 'binary,workq=bundled'. "
    "Env JOBWIRE_BACKEND, ini jobwire_backend."
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--jobwire-backend`` and, per system (beanstalk, gearman, workq, redis),
    ``--jobwire-SYSTEM-url`` and ``--jobwire-SYSTEM-image``, with ini options of the same names
    (``jobwire_backend``, ``jobwire_SYSTEM_url``, ``jobwire_SYSTEM_image``)."""
    group = parser.getgroup("jobwire", "jobwire server fixtures (jobwire.testing)")
    group.addoption("--jobwire-backend", dest="jobwire_backend", metavar="BACKEND",
                    help=_HELP_BACKEND)
    parser.addini("jobwire_backend", _HELP_BACKEND)
    for system in SYSTEMS:
        env = system.upper()
        label = "Redis server (qless)" if system == "redis" else f"{system} server"
        url_help = (f"the URL of a {label} to use: the plugin then starts none (backend "
                    f"external). Env JOBWIRE_{env}_URL, ini jobwire_{system}_url.")
        image_help = (f"the image the container backend runs for {system}. Env "
                      f"JOBWIRE_{env}_IMAGE, ini jobwire_{system}_image.")
        group.addoption(f"--jobwire-{system}-url", dest=f"jobwire_{system}_url", metavar="URL",
                        help=url_help)
        parser.addini(f"jobwire_{system}_url", url_help)
        group.addoption(f"--jobwire-{system}-image", dest=f"jobwire_{system}_image",
                        metavar="IMAGE", help=image_help)
        parser.addini(f"jobwire_{system}_image", image_help)


def pytest_configure(config: pytest.Config) -> None:
    """Read the settings once (a malformed one is a usage error, before any test runs)."""
    config.stash[SETTINGS] = Settings.from_config(config)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say where the servers come from, when it is not the default."""
    settings = config.stash.get(SETTINGS, None)
    if settings is None or not any(
        settings.backend(system) != "bundled" for system in SYSTEMS
    ):
        return None
    return settings.describe()


@pytest.fixture(scope="session")
def jobwire_settings(request: pytest.FixtureRequest) -> Settings:
    """The session's settings: each system's backend, URLs and images."""
    return request.config.stash[SETTINGS]


# -- servers: one per system for the session ----------------------------------------------------


@pytest.fixture(scope="session")
def beanstalk_server(jobwire_settings: Settings) -> Iterator[BeanstalkServer]:
    """A beanstalkd-protocol server for the session (``.url``, ``.host``, ``.port``)."""
    server = provide_beanstalk(jobwire_settings)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gearman_server(jobwire_settings: Settings) -> Iterator[GearmanServer]:
    """A Gearman server for the session (``.url``, ``.host``, ``.port``)."""
    server = provide_gearman(jobwire_settings)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def workq_server(jobwire_settings: Settings) -> Iterator[WorkqServer]:
    """A Workq server for the session (``.url``, ``.host``, ``.port``)."""
    server = provide_workq(jobwire_settings)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server(jobwire_settings: Settings) -> Iterator[RedisServer]:
    """A Redis server for qless, for the session (``.url``, ``.host``, ``.port``)."""
    server = provide_redis(jobwire_settings)
    yield server
    server.stop()


# -- beanstalk ----------------------------------------------------------------------------------


@pytest.fixture
def beanstalk_tube(request: pytest.FixtureRequest) -> str:
    """A tube no other test uses (the beanstalk client fixtures use and watch it)."""
    return unique_name(request)


@pytest.fixture(name="beanstalk_client")
def _beanstalk_client(
    beanstalk_server: BeanstalkServer, beanstalk_tube: str
) -> Iterator[beanstalk_client.Client]:
    """A ``beanstalk_client.Client`` that uses and watches ``beanstalk_tube`` only (``default``
    ignored); closed after the test."""
    from beanstalk_client import Client

    with Client(beanstalk_server.url) as client:
        client.use(beanstalk_tube)
        client.watch(beanstalk_tube)
        client.ignore("default")
        yield client


@pytest.fixture(name="async_beanstalk_client")
async def _async_beanstalk_client(
    beanstalk_server: BeanstalkServer, beanstalk_tube: str
) -> AsyncIterator[beanstalk_client.AsyncClient]:
    """A ``beanstalk_client.AsyncClient`` that uses and watches ``beanstalk_tube`` only; for
    ``@pytest.mark.anyio`` tests."""
    from beanstalk_client import AsyncClient

    async with AsyncClient(beanstalk_server.url) as client:
        await client.use(beanstalk_tube)
        await client.watch(beanstalk_tube)
        await client.ignore("default")
        yield client


# -- Gearman ------------------------------------------------------------------------------------


@pytest.fixture
def gearman_function(request: pytest.FixtureRequest) -> str:
    """A function name no other test uses."""
    return unique_name(request)


@pytest.fixture(name="gearman_client")
def _gearman_client(gearman_server: GearmanServer) -> Iterator[gearman_client.Client]:
    """A ``gearman_client.Client`` of the session's server; closed after the test."""
    from gearman_client import Client

    with Client(gearman_server.url) as client:
        yield client


@pytest.fixture(name="async_gearman_client")
async def _async_gearman_client(
    gearman_server: GearmanServer,
) -> AsyncIterator[gearman_client.AsyncClient]:
    """A ``gearman_client.AsyncClient``; for ``@pytest.mark.anyio`` tests."""
    from gearman_client import AsyncClient

    client = AsyncClient(gearman_server.url)
    try:
        yield client
    finally:
        await client.aclose()


# -- Workq --------------------------------------------------------------------------------------


@pytest.fixture
def workq_name(request: pytest.FixtureRequest) -> str:
    """A queue (job) name no other test uses."""
    return unique_name(request)


@pytest.fixture(name="workq_client")
def _workq_client(workq_server: WorkqServer) -> Iterator[workq_client.Client]:
    """A ``workq_client.Client`` of the session's server; closed after the test."""
    from workq_client import Client

    with Client(workq_server.url) as client:
        yield client


@pytest.fixture(name="async_workq_client")
async def _async_workq_client(
    workq_server: WorkqServer,
) -> AsyncIterator[workq_client.AsyncClient]:
    """A ``workq_client.AsyncClient``; for ``@pytest.mark.anyio`` tests."""
    from workq_client import AsyncClient

    async with AsyncClient(workq_server.url) as client:
        yield client


# -- qless --------------------------------------------------------------------------------------


@pytest.fixture
def qless_queue(request: pytest.FixtureRequest) -> str:
    """A queue name no other test uses."""
    return unique_name(request)


def _flush(server: RedisServer) -> None:
    """Empty the database of a server this plugin runs (never an external one: there the
    unique ``qless_queue`` is all the isolation)."""
    if server.kind != "external":
        from qless_client import Redis

        with Redis.from_url(server.url) as redis:
            redis.execute("FLUSHDB")


@pytest.fixture(name="qless_client")
def _qless_client(redis_server: RedisServer) -> Iterator[qless_client.Client]:
    """A ``qless_client.Client`` on a flushed database (external servers: not flushed);
    closed after the test."""
    from qless_client import Client

    _flush(redis_server)
    with Client(redis_server.url) as client:
        yield client


@pytest.fixture(name="async_qless_client")
async def _async_qless_client(
    redis_server: RedisServer,
) -> AsyncIterator[qless_client.AsyncClient]:
    """A ``qless_client.AsyncClient`` on a flushed database (external servers: not flushed);
    for ``@pytest.mark.anyio`` tests."""
    from qless_client import AsyncClient

    _flush(redis_server)
    async with AsyncClient(redis_server.url) as client:
        yield client
