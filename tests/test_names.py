"""One name for one idea across the four client packages (docs/names.md), and the ``repr`` of
every client, admin and connection class.

The table of docs/names.md is read and every entry is checked against the signature of the
blocking *and* the async class, so the document cannot drift from the code; the keywords of
every public method are checked against names the collection gave up, so an old spelling
cannot come back.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire.serializers import JSON, TEXT
from jobwire.testing import start_gearman

from .conftest import BeanstalkServer, start_server

NAMES = Path(__file__).resolve().parents[1] / "docs" / "names.md"
PACKAGES: dict[str, ModuleType] = {
    "beanstalk": beanstalk_client, "gearman": gearman_client, "workq": workq_client,
    "qless": qless_client,
}
#: The classes a table cell may name, per package (the async twin is checked too).
PREFIXES = {"Client", "Admin", "Queue", "Job", "Redis"}
_ENTRY = re.compile(r"^(?:(\w+)\.)?(\w+)\(([\w=, ]*)\)$")


def _classes(package: ModuleType, name: str) -> list[type]:
    return [getattr(package, name), getattr(package, "Async" + name)]


def _table() -> list[tuple[str, str, str]]:
    """(idea, package, entry) for every backticked entry of the Clients table."""
    text = NAMES.read_text()
    section = text.split("## Clients", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == ["Idea", "beanstalk", "gearman", "workq", "qless"]
    out = []
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        for package, cell in zip(header[1:], cells[1:], strict=True):
            for entry in re.findall(r"`([^`]+)`", cell):
                out.append((cells[0], package, entry))
    return out


TABLE = _table()


def test_the_table_covers_every_package() -> None:
    assert len(TABLE) > 80
    assert {package for _, package, _ in TABLE} == set(PACKAGES)


@pytest.mark.parametrize(("idea", "package", "entry"), TABLE,
                         ids=[f"{p}:{e}" for _, p, e in TABLE])
def test_every_table_entry_is_a_keyword_of_the_sync_and_async_class(
    idea: str, package: str, entry: str
) -> None:
    match = _ENTRY.match(entry)
    assert match, f"{entry!r} ({idea}) is not written as Class.method(keyword=)"
    prefix, method, params = match.groups()
    if prefix is None and method in PREFIXES:  # Client(timeout=): the constructor
        prefix, method = method, "__init__"
    owner = prefix or "Client"
    assert owner in PREFIXES, entry
    for cls in _classes(PACKAGES[package], owner):
        signature = inspect.signature(getattr(cls, method))
        for param in (p.strip().rstrip("=") for p in params.split(",") if p.strip()):
            assert param in signature.parameters, f"{cls.__qualname__}.{method} has no {param}"


def _public_signatures() -> Iterator[tuple[str, str]]:
    """(where, keyword) of every public method and constructor of every client class."""
    owners = {"beanstalk": ["Client"], "gearman": ["Client", "Admin"], "workq": ["Client"],
              "qless": ["Client", "Queue", "Job", "Redis"]}
    for key, package in PACKAGES.items():
        for owner in owners[key]:
            for cls in _classes(package, owner):
                for name, member in inspect.getmembers(cls, callable):
                    if name.startswith("_") and name != "__init__":
                        continue
                    try:
                        signature = inspect.signature(member)
                    except (TypeError, ValueError):
                        continue
                    for param in signature.parameters:
                        yield f"{cls.__module__}.{cls.__qualname__}.{name}", param


#: Spellings the collection gave up for the names of docs/names.md.
GIVEN_UP = {"wait_timeout", "bound", "unix_path", "time", "encoding", "data_encoder",
            "reserve_timeout", "poll_timeout", "batch_size", "in_flight"}


def test_no_public_method_takes_a_name_the_collection_gave_up() -> None:
    found = [(where, param) for where, param in _public_signatures() if param in GIVEN_UP]
    assert found == []


def test_timeout_is_never_a_server_side_wait() -> None:
    """``timeout=`` is the reply timeout everywhere; the methods whose server holds the reply
    back take ``wait=``."""
    waits = {
        beanstalk_client.Client.reserve, beanstalk_client.AsyncClient.reserve,
        workq_client.Client.lease, workq_client.AsyncClient.lease,
        workq_client.Client.result, workq_client.AsyncClient.result,
        workq_client.Client.run, workq_client.AsyncClient.run,
        qless_client.Redis.execute, qless_client.AsyncRedis.execute,
    }
    for method in waits:
        params = inspect.signature(method).parameters
        assert "wait" in params and "timeout" not in params, method


def test_listing_pages_are_offset_and_limit() -> None:
    for cls, name in [(qless_client.Queue, "jobs"), (qless_client.Client, "tagged"),
                      (qless_client.Client, "failed_jobs"), (qless_client.Client, "completed"),
                      (workq_client.Client, "inspect_jobs"),
                      (workq_client.Client, "inspect_queues")]:
        params = list(inspect.signature(getattr(cls, name)).parameters)
        assert params[-2:] == ["offset", "limit"], (cls, name)


# -- repr -----------------------------------------------------------------------------------------


def test_beanstalk_client_repr(server: BeanstalkServer, tube: str) -> None:
    where = f"beanstalk://{server.host}:{server.port}"
    client = beanstalk_client.Client(server.url)
    assert repr(client) == f"<beanstalk_client.Client {where} tube='default'>"
    client.use(tube)
    assert repr(client) == f"<beanstalk_client.Client {where} tube={tube!r}>"
    client.close()
    assert repr(client) == f"<beanstalk_client.Client {where} tube={tube!r} closed>"
    text = beanstalk_client.Client(server.url, serializer=TEXT)
    assert repr(text) == f"<beanstalk_client.Client {where} tube='default' serializer=TEXT>"
    text.close()


def test_beanstalk_client_repr_on_a_unix_socket() -> None:
    server = start_server("bundled", unix=True)
    try:
        assert server.unix_path is not None
        with beanstalk_client.Client(server.unix_path) as client:
            assert repr(client) == (
                f"<beanstalk_client.Client unix://{server.unix_path} tube='default'>"
            )
    finally:
        server.stop()


@pytest.mark.anyio
async def test_beanstalk_async_client_repr(server: BeanstalkServer, tube: str) -> None:
    where = f"beanstalk://{server.host}:{server.port}"
    async with beanstalk_client.AsyncClient(server.url, serializer=JSON) as client:
        await client.use(tube)
        assert repr(client) == (
            f"<beanstalk_client.AsyncClient {where} tube={tube!r} serializer=JSON>"
        )
    assert repr(client).endswith(" closed>")


@pytest.fixture(scope="module")
def two_gearmans() -> Iterator[tuple[Any, Any]]:
    first, second = start_gearman("bundled"), start_gearman("bundled")
    yield first, second
    first.stop()
    second.stop()


def test_gearman_reprs(two_gearmans: tuple[Any, Any]) -> None:
    first, second = two_gearmans
    one = f"gearman://127.0.0.1:{first.port}"
    two = f"gearman://127.0.0.1:{second.port}"
    client = gearman_client.Client([f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"],
                                   serializer=TEXT)
    assert repr(client) == f"<gearman_client.Client {one},{two} serializer=TEXT>"
    assert client.echo(b"x") == b"x"
    client.close()
    assert repr(client) == f"<gearman_client.Client {one},{two} serializer=TEXT closed>"
    with gearman_client.Admin(first.url) as admin:
        assert repr(admin) == f"<gearman_client.Admin {one}>"
        assert admin.version()
    assert repr(admin) == f"<gearman_client.Admin {one} closed>"


@pytest.mark.anyio
async def test_gearman_async_reprs(two_gearmans: tuple[Any, Any]) -> None:
    first, _ = two_gearmans
    one = f"gearman://127.0.0.1:{first.port}"
    async with gearman_client.AsyncClient(first.url) as client:
        assert repr(client) == f"<gearman_client.AsyncClient {one}>"
        job = await client.start("nobody-runs-this", b"x", timeout=10)
        assert repr(job) == f"<gearman_client.AsyncRunningJob {job.handle.decode()} running>"
    async with gearman_client.AsyncAdmin(first.url) as admin:
        assert repr(admin) == f"<gearman_client.AsyncAdmin {one}>"


def test_workq_reprs() -> None:
    from workq_client.server import run_server

    with run_server() as server:
        where = f"workq://{server.address}"
        with workq_client.Client(server.address) as client:
            assert repr(client) == f"<workq_client.Client {where}>"
        assert repr(client) == f"<workq_client.Client {where} closed>"

        async def main() -> None:
            async with workq_client.AsyncClient(server.address, serializer=TEXT) as aclient:
                assert repr(aclient) == f"<workq_client.AsyncClient {where} serializer=TEXT>"

        anyio.run(main)


def test_qless_and_redis_reprs_never_show_a_password(redis_server: Any) -> None:
    port = redis_server.port
    redis = qless_client.Redis(f"redis://127.0.0.1:{port}/3", client_name="names-test")
    assert repr(redis) == (
        f"<qless_client.Redis redis://127.0.0.1:{port}/3 client_name='names-test'>"
    )
    redis.close()
    assert repr(redis).endswith(" closed>")
    unix = qless_client.AsyncRedis(f"unix://{redis_server.unix_path}?db=2", protocol=3)
    assert repr(unix) == (
        f"<qless_client.AsyncRedis unix://{redis_server.unix_path}?db=2 protocol=3>"
    )
    secret = qless_client.AsyncRedis("redis://alice:s3cret@127.0.0.1:1/0")
    assert repr(secret) == "<qless_client.AsyncRedis redis://127.0.0.1:1 user='alice'>"
    assert "s3cret" not in repr(qless_client.AsyncClient(secret))
    with qless_client.Client(f"redis://127.0.0.1:{port}", worker_name="w-1") as client:
        assert repr(client) == f"<qless_client.Client redis://127.0.0.1:{port} worker='w-1'>"
    text = qless_client.AsyncClient(f"127.0.0.1:{port}", worker_name="w-2", serializer=TEXT)
    assert repr(text) == (
        f"<qless_client.AsyncClient redis://127.0.0.1:{port} worker='w-2' serializer=TEXT>"
    )


@pytest.fixture
def redis_server() -> Iterator[Any]:
    from .qless.conftest import start_redis

    server = start_redis()
    yield server
    server.stop()


# -- the workers' table ---------------------------------------------------------------------------

_CALL = re.compile(r"^(\w+)\((.*)\)$")
_DEFAULT = re.compile(r"^(\w+)=(.+)$")


def _workers_table() -> list[tuple[str, str, str]]:
    """(row, package, entry) for every backticked entry of the Workers table; ``same`` is the
    beanstalk cell again."""
    section = NAMES.read_text().split("## Workers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == ["", "beanstalk", "gearman", "workq", "qless"]
    out: list[tuple[str, str, str]] = []
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        first = cells[1]
        for package, cell in zip(header[1:], cells[1:], strict=True):
            entries = re.findall(r"`([^`]+)`", first if cell == "same" else cell)
            assert entries, f"{row}: no entry for {package}"
            out.extend((cells[0], package, entry) for entry in entries)
    return out


WORKERS_TABLE = _workers_table()


def test_the_workers_table_covers_every_package_and_row() -> None:
    assert {package for _, package, _ in WORKERS_TABLE} == set(PACKAGES)
    rows = {row for row, _, _ in WORKERS_TABLE}
    assert {"Build", "Handler", "Stop", "Stats: in all four"} <= rows
    assert len(WORKERS_TABLE) >= 4 * len(rows)


def _check_call(cls: type, entry: str) -> None:
    """``method(a, b=X, *, c=, …, **Options)`` against ``cls.method`` (``Worker`` is the
    constructor): the positional parameters in order (a default where one is written), the
    keywords keyword-only; after a ``*`` without ``…`` or ``**``, no keyword is left out."""
    match = _CALL.match(entry)
    assert match, entry
    method, params = match.groups()
    function = cls.__init__ if method == "Worker" else getattr(cls, method)  # type: ignore[misc]
    signature = inspect.signature(function)
    params_of = [p for p in signature.parameters.values() if p.name != "self"]
    tokens = [t.strip() for t in params.split(",") if t.strip()]
    star = tokens.index("*") if "*" in tokens else len(tokens)
    positional, keywords = tokens[:star], tokens[star + 1:]
    where = f"{cls.__module__}.{cls.__qualname__}.{method}"
    if positional[:1] != ["…"]:
        actual = [p for p in params_of if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert [t.partition("=")[0] for t in positional] == [p.name for p in actual], where
        for token, param in zip(positional, actual, strict=True):
            if "=" in token:
                assert repr(param.default) == token.partition("=")[2], (where, token)
    else:
        keywords = positional[1:] + keywords
    open_ended = "*" not in tokens  # ``run(handler)`` names the positional parameters only
    named = set()
    for token in keywords:
        if token == "…":
            open_ended = True
        elif token.startswith("**"):
            open_ended = True
            var = [p for p in params_of if p.kind is p.VAR_KEYWORD]
            assert var and re.search(rf"\b{token[2:]}\b", str(var[0].annotation)), (where, token)
        else:
            name, _, default = token.partition("=")
            keyword = signature.parameters.get(name)
            assert keyword is not None and keyword.kind is keyword.KEYWORD_ONLY, (where, name)
            if default:
                assert repr(keyword.default) == default, (where, token)
            named.add(name)
    if not open_ended:
        actual_keywords = {p.name for p in params_of if p.kind is p.KEYWORD_ONLY}
        assert actual_keywords == named, where


@pytest.mark.parametrize(("row", "package", "entry"), WORKERS_TABLE,
                         ids=[f"{p}:{e}" for _, p, e in WORKERS_TABLE])
def test_every_workers_table_entry_matches_the_sync_and_async_worker(
    row: str, package: str, entry: str
) -> None:
    for cls in _classes(PACKAGES[package], "Worker"):
        if _CALL.match(entry):
            _check_call(cls, entry)
        elif match := _DEFAULT.match(entry):
            param = inspect.signature(cls).parameters[match[1]]
            assert repr(param.default) == match[2], (cls, entry)
        else:  # a counter of worker.stats
            assert row.startswith(("Stats", "What is left")), (row, entry)
            stats = importlib.import_module(f"{package}_client.worker").WorkerStats
            assert entry in {f.name for f in dataclasses.fields(stats)}, (package, entry)
