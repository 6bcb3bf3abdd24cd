"""What a user gets: the sdist and the wheel that ``python -m build`` makes, installed and run.

The build runs on a copy of the work tree (caches, ``.venv`` and ``.git`` left out) with
``--no-isolation``, so it needs no network: the ``test`` extra puts ``build`` and
``setuptools>=77`` in the venv. The wheel from that sdist is installed into a fresh venv with
``pip --no-index --no-deps``; its declared dependencies (and theirs) are then copied in from this
venv's installed files, so the fresh venv holds exactly jobwire and what its metadata asks for,
and ``pip check`` says whether that is enough. A quick selection of the test suite runs from the
unpacked sdist (this venv's Python, the sdist's packages and tests first on ``sys.path``), and the
whole suite is collected there to show that every test module imports from what ships.
"""

from __future__ import annotations

import configparser
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from jobwire._version import __version__

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jobwire", "beanstalk_client", "gearman_client", "workq_client", "qless_client")
#: Folders the sdist carries whole (besides the packages).
SDIST_FOLDERS = ("tests", "scripts", "docs", "examples", "benchmarks")
#: What never ships: caches, the venv, git, build output.
NOT_SOURCE = shutil.ignore_patterns(
    ".venv", ".git", "*.egg-info", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis",
    "__pycache__", "*.py[cod]", "build", "dist", "site",
    "quick",  # benchmarks/results/quick/: scripts/bench --check's scratch runs, git-ignored
)
#: Run from the unpacked sdist: the transcripts (the Sans-IO cores in both roles; replayed byte
#: for byte against the bundled Gearman server, started from the sdist's package, and gearmand),
#: the fuzz corpus, and the sdist's Lua script against redis-server.
SDIST_SELECTION = (
    "tests/test_url.py",
    "tests/beanstalk/test_core.py",
    "tests/gearman/test_core.py",
    "tests/workq/test_core.py",
    "tests/fuzz/test_harness.py",
    "tests/gearman/test_server.py",
    "tests/qless/test_lua.py",
)


def test_every_package_carries_the_one_version() -> None:
    Version(__version__)  # a PEP 440 version
    for name in PACKAGES:
        assert importlib.import_module(name).__version__ == __version__, name
    newest = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert newest is not None and newest.group(1) == __version__


# -- building ---------------------------------------------------------------------------------


@dataclass
class Built:
    tmp: Path
    source: Path  # the copy of the work tree that was built
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("packaging")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE, symlinks=True)
    out = tmp / "dist"
    # No flags: the sdist first, then the wheel built from that sdist.
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    assert sdist.name == f"jobwire-{__version__}.tar.gz"
    assert wheel.name == f"jobwire-{__version__}-py3-none-any.whl"
    return Built(tmp, source, sdist, wheel)


def files_under(top: Path, folder: str) -> set[str]:
    return {p.relative_to(top).as_posix() for p in (top / folder).rglob("*") if p.is_file()}


def package_sources(top: Path) -> set[str]:
    return {
        name
        for package in PACKAGES
        for name in files_under(top, package)
        if name.endswith(".py") or name.endswith(".lua") or name.endswith("/py.typed")
        or name.startswith(("jobwire/web/templates/", "jobwire/web/static/"))
    }


def headers(text: str) -> Message:
    return HeaderParser().parsestr(text)


def check_license_metadata(meta: Message) -> None:
    assert meta["Metadata-Version"] is not None and Version(meta["Metadata-Version"]) >= Version(
        "2.4"
    )
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["License"] is None  # the old free-text field is gone
    assert not [c for c in meta.get_all("Classifier", []) if c.startswith("License ::")]


# -- the sdist --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_sdist_carries_the_suite_the_scripts_the_docs_and_no_ci(built: Built) -> None:
    with tarfile.open(built.sdist) as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        pkg_info = tar.extractfile(f"jobwire-{__version__}/PKG-INFO")
        assert pkg_info is not None
        meta = headers(pkg_info.read().decode())
    top = f"jobwire-{__version__}/"
    assert all(name.startswith(top) for name in members)
    names = {name[len(top):] for name in members}

    for folder in SDIST_FOLDERS:  # whole, file for file
        shipped = {n for n in names if n.startswith(folder + "/")}
        assert shipped == files_under(built.source, folder), folder
    assert package_sources(built.source) <= names
    for name in ["LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "MANIFEST.in"]:
        assert name in names
    if (built.source / "mkdocs.yml").exists():
        assert "mkdocs.yml" in names
    assert {n for n in names if n.startswith("tests/transcripts/") and n.endswith(".jsonl")} == {
        "tests/transcripts/beanstalkd-1.12.jsonl",
        "tests/transcripts/gearmand-1.1.20.jsonl",
        "tests/transcripts/workq-0.2.0.jsonl",
    }
    for protocol in ["beanstalk", "gearman", "workq", "resp"]:
        assert any(n.startswith(f"tests/fuzz/corpus/{protocol}/") for n in names), protocol
    assert "tests/test_packaging.py" in names

    assert not [n for n in names if n.startswith(".ci/") or n.startswith(".git/")]
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    for script in ["scripts/test", "scripts/demo", "scripts/bench"]:
        assert members[top + script].mode & 0o111, script  # still executable

    assert meta["Version"] == __version__
    check_license_metadata(meta)


# -- the wheel --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_wheel_carries_only_the_packages_and_says_what_it_is(built: Built) -> None:
    dist_info = f"jobwire-{__version__}.dist-info"
    with zipfile.ZipFile(built.wheel) as whl:
        names = set(whl.namelist())
        meta = headers(whl.read(f"{dist_info}/METADATA").decode())
        entry_points = whl.read(f"{dist_info}/entry_points.txt").decode()
        license_text = whl.read(f"{dist_info}/licenses/LICENSE").decode()

    assert {n.split("/")[0] for n in names} == {*PACKAGES, dist_info}
    assert {n for n in names if not n.startswith(dist_info + "/")} == package_sources(built.source)
    for package in PACKAGES:
        assert f"{package}/py.typed" in names
    assert "qless_client/lua/qless.lua" in names
    assert "jobwire/_version.py" in names

    assert meta["Name"] == "jobwire"
    assert meta["Version"] == __version__
    assert meta["Requires-Python"] == ">=3.10"
    check_license_metadata(meta)
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Copyright (c) 2026 the jobwire authors" in license_text
    classifiers = set(meta.get_all("Classifier", []))
    for minor in range(10, 14):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert "Typing :: Typed" in classifiers
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL", []))
    assert set(urls) == {"Homepage", "Documentation", "Source", "Changelog", "Issues"}
    assert all(u.startswith("https://github.com/jobwire/jobwire") for u in urls.values())
    assert {"cli", "trio", "spark", "docs", "test"} <= set(meta.get_all("Provides-Extra", []))
    plain = sorted(
        Requirement(r).name for r in meta.get_all("Requires-Dist", []) if ";" not in r
    )
    assert plain == ["anyio", "typing-extensions"]  # what `pip install jobwire` brings

    points = configparser.ConfigParser()
    points.read_string(entry_points)
    assert dict(points["console_scripts"]) == {"jobwire": "jobwire.cli:main"}
    assert dict(points["pytest11"]) == {"jobwire": "jobwire.testing"}


# -- installing the wheel ---------------------------------------------------------------------


def runtime_closure(requirements: list[str]) -> list[metadata.Distribution]:
    """The installed distributions that ``requirements`` (no extras) need, theirs included.

    Raises AssertionError (a test failure) when this venv lacks one or has a version the
    requirement does not allow.
    """
    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dist = metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (req, dist.version)
        key = dist.metadata["Name"].lower()
        if key not in found:
            found[key] = dist
            todo.extend(Requirement(r) for r in dist.requires or [])
    return list(found.values())


def copy_installed(dist: metadata.Distribution, site_packages: Path) -> None:
    """Copy an installed distribution's files (its dist-info included) into ``site_packages``."""
    base = Path(str(dist.locate_file(""))).resolve()
    for file in dist.files or []:
        path = Path(str(dist.locate_file(file))).resolve()
        if not path.is_relative_to(base) or "__pycache__" in path.parts or not path.is_file():
            continue  # scripts in bin/, bytecode
        target = site_packages / path.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


#: Run by the fresh venv's Python: every public name of every package, a bundled server and a
#: client talking over loopback, the Lua script read from the installed package.
IN_FRESH_VENV = """
import importlib, json, sys
from importlib import metadata
out = {"versions": {}, "files": {}}
for name in %(packages)r:
    module = importlib.import_module(name)
    out["versions"][name] = module.__version__
    for attr in getattr(module, "__all__", []):
        getattr(module, attr)
    out["files"][name] = module.__file__
from beanstalk_client import Client
from beanstalk_client.server import run_server
with run_server() as server, Client.from_url(server.url, timeout=10) as client:
    client.put(b"from the wheel")
    job = client.reserve(5)
    client.delete(job)
    out["body"] = job.body.decode()
import qless_client._scripts
out["files"]["qless_client._scripts"] = qless_client._scripts.__file__
out["lua_bytes"] = len(qless_client._scripts.SOURCE)
out["metadata_version"] = metadata.version("jobwire")
points = metadata.entry_points()
out["console"] = [e.value for e in points.select(group="console_scripts", name="jobwire")]
out["pytest11"] = [e.value for e in points.select(group="pytest11", name="jobwire")]
out["prefix"] = sys.prefix
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_venv_and_works(built: Built) -> None:
    env_dir = built.tmp / "fresh-venv"
    venv.create(env_dir, with_pip=False, symlinks=os.name != "nt")
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    proc = subprocess.run(
        [*pip, "install", "--no-index", "--no-deps", str(built.wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site_packages = Path(
        subprocess.check_output(
            [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            text=True,
        ).strip()
    )
    with zipfile.ZipFile(built.wheel) as whl:
        meta = headers(whl.read(f"jobwire-{__version__}.dist-info/METADATA").decode())
    for dist in runtime_closure(meta.get_all("Requires-Dist", [])):
        copy_installed(dist, site_packages)
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr

    proc = subprocess.run(
        [str(python), "-I", "-c", IN_FRESH_VENV % {"packages": PACKAGES}],
        capture_output=True, text=True, timeout=120, cwd=built.tmp,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout)
    assert got["versions"] == dict.fromkeys(PACKAGES, __version__)
    assert got["metadata_version"] == __version__
    assert Path(got["prefix"]) == env_dir
    for name, file in got["files"].items():
        assert Path(file).is_relative_to(site_packages), (name, file)
    assert got["body"] == "from the wheel"
    assert got["lua_bytes"] > 1000
    assert got["console"] == ["jobwire.cli:main"]
    assert got["pytest11"] == ["jobwire.testing"]
    assert (env_dir / "bin" / "jobwire").is_file()
    assert not (site_packages / "tests").exists()
    # Without the cli extra the command says what to install, in one line, no traceback.
    cli = subprocess.run([str(env_dir / "bin" / "jobwire"), "--help"], capture_output=True,
                         text=True, timeout=60)
    assert cli.returncode == 2, cli.stderr
    assert "pip install 'jobwire[cli]'" in cli.stderr and "Traceback" not in cli.stderr


# -- the suite from the sdist -----------------------------------------------------------------


@pytest.fixture(scope="module")
def unpacked(built: Built) -> Path:
    dest = built.tmp / "unpacked"
    with tarfile.open(built.sdist) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python before 3.10.12 / 3.11.4
            tar.extractall(dest)
    (root,) = dest.iterdir()
    return root


WHERE_FROM = """
import importlib, json
print(json.dumps({name: importlib.import_module(name).__file__ for name in %(modules)r}))
"""


def sdist_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(root)
    return env


@pytest.mark.slow
def test_a_selection_of_the_suite_runs_from_the_unpacked_sdist(unpacked: Path) -> None:
    modules = [*PACKAGES, "jobwire.testing", "tests.conftest", "tests.fuzz.harness"]
    where = subprocess.run(
        [sys.executable, "-c", WHERE_FROM % {"modules": modules}],
        capture_output=True, text=True, timeout=60, cwd=unpacked, env=sdist_env(unpacked),
    )
    assert where.returncode == 0, where.stderr
    for name, file in json.loads(where.stdout).items():
        assert Path(file).is_relative_to(unpacked), (name, file)

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-x", *SDIST_SELECTION],
        capture_output=True, text=True, timeout=600, cwd=unpacked, env=sdist_env(unpacked),
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert f"rootdir: {unpacked}" in proc.stdout
    assert "configfile: pyproject.toml" in proc.stdout
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary) and "failed" not in summary, summary


#: A pytest plugin for the collection below: each test module's collect outcome, as JSON.
COLLECT_REPORT_PLUGIN = """
import json, os
outcomes = {}
def pytest_collectreport(report):
    if report.nodeid.endswith(".py"):
        outcomes[report.nodeid] = report.outcome
def pytest_sessionfinish(session):
    with open(os.environ["JOBWIRE_COLLECT_REPORT"], "w") as out:
        json.dump(outcomes, out)
"""


@pytest.mark.slow
def test_every_test_module_of_the_sdist_imports(built: Built, unpacked: Path) -> None:
    plugins = built.tmp / "plugins"
    plugins.mkdir()
    (plugins / "collect_report.py").write_text(COLLECT_REPORT_PLUGIN)
    env = sdist_env(unpacked)
    env["PYTHONPATH"] += os.pathsep + str(plugins)
    env["JOBWIRE_COLLECT_REPORT"] = str(built.tmp / "collected.json")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "collect_report",
         "--collect-only", "-q"],
        capture_output=True, text=True, timeout=600, cwd=unpacked, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    outcomes: dict[str, str] = json.loads((built.tmp / "collected.json").read_text())
    source = built.source
    modules = {p.relative_to(source).as_posix() for p in source.glob("tests/**/test_*.py")}
    # Every test module of the work tree was collected from the sdist: imported, or skipped at
    # module level saying why (the Spark modules without PySpark or Java, outside CI).
    assert {m: outcomes.get(m) for m in modules} == {
        m: "skipped" if outcomes.get(m) == "skipped" else "passed" for m in modules
    }
    assert re.search(r"^\d+ tests? collected", proc.stdout, re.MULTILINE), proc.stdout[-2000:]
