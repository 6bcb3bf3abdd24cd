"""Where the plugin's servers come from: the backend of each system (``bundled``, ``binary``,
``container``, ``external``), read from the command line, the environment and the ini file,
and the function that provides one server of a system for the session."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from jobwire._url import TCPAddress, UnixAddress, parse_url

from ._process import unavailable
from ._servers import (
    BeanstalkServer,
    GearmanServer,
    RedisServer,
    WorkqServer,
    start_beanstalk,
    start_gearman,
    start_redis,
    start_workq,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_IMAGES",
    "SYSTEMS",
    "Settings",
    "parse_backends",
    "probe",
    "provide_beanstalk",
    "provide_gearman",
    "provide_redis",
    "provide_workq",
]

#: The systems, by the names the options and environment variables use.
SYSTEMS = ("beanstalk", "gearman", "workq", "redis")
#: Where a server comes from.
BACKENDS = ("bundled", "binary", "container", "external")
#: The server's port inside a container, and the default URL scheme.
PORTS = {"beanstalk": 11300, "gearman": 4730, "workq": 9922, "redis": 6379}
SCHEMES = {"beanstalk": "beanstalk", "gearman": "gearman", "workq": "workq", "redis": "redis"}
#: Images for the ``container`` backend (each starts its server on its default port with the
#: image's own command). Workq has no published image: give one with JOBWIRE_WORKQ_IMAGE.
DEFAULT_IMAGES: dict[str, str | None] = {
    "beanstalk": "ghcr.io/beanstalkd/beanstalkd:latest",
    "gearman": "artefactual/gearmand:1.1.21.4-alpine",
    "workq": None,
    "redis": "redis:7-alpine",
}
#: Seconds a container may take to answer once started (its image may be pulled before).
CONTAINER_READY_TIMEOUT = 60.0

S = TypeVar("S")


def parse_backends(text: str) -> dict[str, str]:
    """``"binary"`` (every system) or ``"binary,workq=bundled"`` (a default and per-system
    choices, in any order) → the backend of each system; the default default is ``bundled``.

    Raises:
        ValueError: an unknown backend or system.
    """
    default, chosen = "bundled", {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        system, sep, backend = part.rpartition("=")
        system, backend = system.strip(), backend.strip()
        if backend not in BACKENDS:
            raise ValueError(f"{part!r}: the backend is one of {', '.join(BACKENDS)}")
        if not sep:
            default = backend
        elif system in SYSTEMS:
            chosen[system] = backend
        else:
            raise ValueError(f"{part!r}: the system is one of {', '.join(SYSTEMS)}")
    return {system: chosen.get(system, default) for system in SYSTEMS}


def _check_url(system: str, url: str) -> None:
    if system == "redis":
        from qless_client import parse_redis_address

        parse_redis_address(url)
    else:
        parse_url(url, scheme=SCHEMES[system], default_port=PORTS[system],
                  unix=system == "beanstalk")


@dataclass(frozen=True)
class Settings:
    """The plugin's configuration for one test session (see :meth:`from_config`)."""

    backends: Mapping[str, str]
    urls: Mapping[str, str]
    images: Mapping[str, str | None]

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        """Read every setting: the command line first, then the environment, then the ini file.

        Raises:
            pytest.UsageError: a backend, system or URL that is not one.
        """
        def value(option: str, env: str) -> str | None:
            given = config.getoption(option.replace("-", "_"), None)
            if given:
                return str(given)
            if os.environ.get(env):
                return os.environ[env]
            ini = config.getini(option.replace("-", "_"))
            return str(ini) if ini else None

        try:
            backends = parse_backends(value("jobwire-backend", "JOBWIRE_BACKEND") or "")
        except ValueError as exc:
            raise pytest.UsageError(f"--jobwire-backend / JOBWIRE_BACKEND: {exc}") from None
        urls: dict[str, str] = {}
        images: dict[str, str | None] = {}
        for system in SYSTEMS:
            url = value(f"jobwire-{system}-url", f"JOBWIRE_{system.upper()}_URL")
            if url:
                try:
                    _check_url(system, url)
                except (TypeError, ValueError) as exc:
                    raise pytest.UsageError(f"--jobwire-{system}-url: {exc}") from None
                urls[system] = url
            images[system] = (value(f"jobwire-{system}-image", f"JOBWIRE_{system.upper()}_IMAGE")
                              or DEFAULT_IMAGES[system])
        return cls(backends, urls, images)

    def backend(self, system: str) -> str:
        """The backend of ``system``: ``external`` whenever its URL is given."""
        return "external" if system in self.urls else self.backends[system]

    def describe(self) -> str:
        """One line for the test session's header."""
        return "jobwire servers: " + ", ".join(
            f"{system}={self.backend(system)}" for system in SYSTEMS
        )


# -- probing a server ---------------------------------------------------------------------------


def probe(system: str, url: str, timeout: float = 5.0) -> dict[str, Any]:
    """Ask the server at ``url`` something harmless with jobwire's own client (beanstalk:
    ``stats``; Gearman: the admin ``version``; Workq: ``inspect server``; Redis: ``PING``) and
    return what is worth knowing (beanstalk: ``max_job_size``).

    Raises:
        OSError, jobwire.JobwireError: nothing answers there, or not in that protocol.
    """
    if system == "beanstalk":
        from beanstalk_client import Client as BeanstalkClient

        with BeanstalkClient(url, timeout=timeout) as beanstalk:
            return {"max_job_size": beanstalk.stats()["max-job-size"]}
    if system == "gearman":
        from gearman_client import Admin

        with Admin(url, timeout=timeout) as admin:
            admin.version()
        return {}
    if system == "workq":
        from workq_client import Client as WorkqClient

        with WorkqClient(url, timeout=timeout) as workq:
            workq.inspect_server()
        return {}
    from qless_client import Redis

    with Redis.from_url(url, timeout=timeout) as redis:
        redis.execute("PING")
    return {}


def _wait_answering(system: str, url: str, limit: float) -> dict[str, Any]:
    """Probe until the server answers (a container's port may be open before its server)."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return probe(system, url, timeout=2.0)
        except Exception as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {system} server at {url} did not answer within "
                                   f"{limit:.0f} s: {type(exc).__name__}: {exc}") from exc
            time.sleep(0.2)


# -- the external backend -----------------------------------------------------------------------


@dataclass(frozen=True)
class _External:
    url: str
    address: TCPAddress | UnixAddress
    facts: dict[str, Any]

    @property
    def tcp(self) -> TCPAddress:
        if not isinstance(self.address, TCPAddress):  # refused by _check_url already
            raise pytest.UsageError(f"{self.url}: a TCP address is needed here")
        return self.address


def _external(settings: Settings, system: str) -> _External:
    """The URL given for ``system``, checked by asking the server something (an external
    server that does not answer fails the tests that need it: the URL was given on purpose)."""
    url = settings.urls.get(system)
    if url is None:
        unavailable(f"--jobwire-backend=external: no {system} server given (pass "
                    f"--jobwire-{system}-url URL or set JOBWIRE_{system.upper()}_URL)")
    try:
        facts = probe(system, url)
    except Exception as exc:
        pytest.fail(f"--jobwire-{system}-url {url}: the server does not answer: "
                    f"{type(exc).__name__}: {exc}", pytrace=False)
    if system == "redis":
        from qless_client import parse_redis_address

        return _External(url, parse_redis_address(url)[0], facts)
    return _External(url, parse_url(url, scheme=SCHEMES[system], default_port=PORTS[system]),
                     facts)


# -- the container backend (testcontainers, imported only here) -----------------------------------


def _run_container(settings: Settings, system: str) -> tuple[str, int, Callable[[], None]]:
    """Start the system's image; return the host and port it is reached at, and its stopper.

    Skips (fails under JOBWIRE_REQUIRE_REAL_SERVERS=1) when there is no image for the system,
    testcontainers is not installed, or no Docker engine answers.
    """
    image = settings.images[system]
    if image is None:
        unavailable(f"--jobwire-backend=container: {system} has no published server image; "
                    f"give one with --jobwire-{system}-image or JOBWIRE_{system.upper()}_IMAGE")
    try:
        from testcontainers.core.container import DockerContainer
    except ImportError as exc:
        unavailable(f"--jobwire-backend=container needs testcontainers "
                    f"(pip install 'testcontainers>=4'): {exc}")
    try:
        container = DockerContainer(image).with_exposed_ports(PORTS[system])
    except Exception as exc:  # docker.errors.DockerException, mostly
        unavailable(f"--jobwire-backend=container: no Docker engine answers "
                    f"({type(exc).__name__}: {exc}); start Docker (or set DOCKER_HOST), or "
                    f"choose another backend (--jobwire-backend=bundled)")
    try:
        container.start()
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(PORTS[system]))
    except Exception as exc:
        container.stop()
        pytest.fail(f"--jobwire-backend=container: the {system} image {image} did not start: "
                    f"{type(exc).__name__}: {exc}", pytrace=False)
    return host, port, container.stop


def _container(settings: Settings, system: str, make: Callable[[str, int, Callable[[], None]], S],
               url_of: Callable[[S], str]) -> tuple[S, dict[str, Any]]:
    host, port, stop = _run_container(settings, system)
    server = make(host, port, stop)
    try:
        facts = _wait_answering(system, url_of(server), CONTAINER_READY_TIMEOUT)
    except BaseException:
        stop()
        raise
    return server, facts


# -- one server per system ----------------------------------------------------------------------


def provide_beanstalk(settings: Settings) -> BeanstalkServer:
    """The session's beanstalk server, from the backend ``settings`` choose."""
    backend = settings.backend("beanstalk")
    if backend == "external":
        found = _external(settings, "beanstalk")
        size = found.facts["max_job_size"]
        if isinstance(found.address, UnixAddress):
            return BeanstalkServer("external", None, unix_path=found.address.path,
                                   max_job_size=size)
        return BeanstalkServer("external", None, found.tcp.host, found.tcp.port,
                               max_job_size=size)
    if backend == "container":
        server, facts = _container(
            settings, "beanstalk",
            lambda host, port, stop: BeanstalkServer("container", None, host, port, on_stop=stop),
            lambda s: s.url)
        server.max_job_size = facts["max_job_size"]
        return server
    return start_beanstalk("bundled" if backend == "bundled" else "beanstalkd")


def provide_gearman(settings: Settings) -> GearmanServer:
    """The session's Gearman server, from the backend ``settings`` choose."""
    backend = settings.backend("gearman")
    if backend == "external":
        address = _external(settings, "gearman").tcp
        return GearmanServer("external", None, address.port, address.host)
    if backend == "container":
        return _container(
            settings, "gearman",
            lambda host, port, stop: GearmanServer("container", None, port, host, on_stop=stop),
            lambda s: s.url)[0]
    return start_gearman("bundled" if backend == "bundled" else "gearmand")


def provide_workq(settings: Settings) -> WorkqServer:
    """The session's Workq server, from the backend ``settings`` choose (``binary``: a
    ``workq-server`` on ``PATH``, else a skip that says so)."""
    backend = settings.backend("workq")
    if backend == "external":
        address = _external(settings, "workq").tcp
        return WorkqServer(None, address.host, address.port, "external")
    if backend == "container":
        return _container(
            settings, "workq",
            lambda host, port, stop: WorkqServer(None, host, port, "container", on_stop=stop),
            lambda s: s.url)[0]
    return start_workq(kind="bundled" if backend == "bundled" else "workq-server")


def provide_redis(settings: Settings) -> RedisServer:
    """The session's Redis server for qless, from the backend ``settings`` choose (``bundled``
    and ``binary`` both run ``redis-server`` from ``PATH``: qless has no bundled server)."""
    backend = settings.backend("redis")
    if backend == "external":
        found = _external(settings, "redis")
        if isinstance(found.address, UnixAddress):
            return RedisServer(None, 0, found.address.path, [], "", "external",
                               given_url=found.url)
        return RedisServer(None, found.tcp.port, "", [], found.tcp.host, "external",
                           given_url=found.url)
    if backend == "container":
        return _container(
            settings, "redis",
            lambda host, port, stop: RedisServer(None, port, "", [], host, "container",
                                                 on_stop=stop),
            lambda s: s.url)[0]
    return start_redis()
