"""The compiled (mypyc) build runs the same tests as the pure-Python package (issue 22).

``scripts/build_compiled.py`` builds it once per session into a temporary directory; a
subprocess then runs the Sans-IO cores' tests and the beanstalk client's against it, with the
build first on ``sys.path`` (``PYTHONPATH``, ``-P`` so the project's root does not come first,
``--import-mode=append`` so pytest does not put it first either), and checks afterwards that
the modules the tests used were the extension modules. No mypyc or no C compiler skips, and
fails under ``JOBWIRE_REQUIRE_REAL_SERVERS=1`` (CI has both).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from jobwire.testing._process import unavailable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import build_compiled
finally:
    sys.path.remove(str(ROOT / "scripts"))

pytestmark = pytest.mark.slow  # a 15 s build, then about 35 s of tests

#: What the compiled build must pass: the cores' tests, then the clients on top of them.
SUITE = (
    "tests/beanstalk/test_core.py",
    "tests/beanstalk/test_client.py",
    "tests/gearman/test_core.py",
    "tests/workq/test_core.py",
    "tests/qless/test_resp.py",
    "tests/test_core_eof.py",
    "tests/test_stale_replies.py",
)

#: Run in the subprocess: pytest on SUITE, then the file of every compiled module it used.
_RUN = """
import importlib, sys
import pytest
code = pytest.main(sys.argv[1:])
for name in {names!r}:
    print("compiled-module", importlib.import_module(name).__file__)
sys.exit(int(code))
"""


def _compiler() -> str | None:
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


@pytest.fixture(scope="session")
def compiled_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of a fresh compiled build (outside the source tree)."""
    if importlib.util.find_spec("mypyc") is None:
        unavailable("mypyc is not installed (pip install mypy)")
    if _compiler() is None:
        unavailable("no C compiler for mypyc")
    out = tmp_path_factory.mktemp("compiled")
    build_compiled.build(out)
    return out


def test_the_build_imports_its_extension_modules(compiled_build: Path) -> None:
    """Every module the build compiles is imported from its ``.so`` on the build's path."""
    files = build_compiled.check_extensions(compiled_build)
    assert len(files) == len(build_compiled.COMPILED)
    assert all(file.endswith(".so") and file.startswith(str(compiled_build)) for file in files)
    assert not list(ROOT.glob("*/*.so")), "the build left extension modules in the tree"


def test_the_compiled_build_passes_the_cores_and_client_tests(compiled_build: Path) -> None:
    """The same test files, on the compiled build, all pass; the modules they ran were the
    compiled ones."""
    env = dict(os.environ, PYTHONPATH=str(compiled_build))
    code = _RUN.format(names=build_compiled.module_names())
    args = ["-q", "-x", "-p", "no:cacheprovider", "--import-mode=append", *SUITE]
    result = subprocess.run(
        [sys.executable, "-P", "-c", code, *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=600,
    )
    tail = "\n".join(result.stdout.splitlines()[-40:]) + result.stderr[-2000:]
    assert result.returncode == 0, tail
    used = [line.split(" ", 1)[1] for line in result.stdout.splitlines()
            if line.startswith("compiled-module ")]
    assert len(used) == len(build_compiled.COMPILED), tail
    assert all(file.startswith(str(compiled_build)) and file.endswith(".so") for file in used), used
