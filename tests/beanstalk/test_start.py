"""The bundled servers are ready as fast as test suites expect of beanstalkd: greenstalk's suite
spawns the binary, sleeps 0.1 s and connects once, with no retry. Import-path size is the
cause this guards (importing the client, the worker and all of anyio took 0.27-0.46 s), so it is
checked by what has been imported when the socket listens, not by a clock (a timed check failed
on a loaded machine)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobwire._lazy import type_checking_imports

_LISTEN_PROBE = """
import os, runpy, socket, sys
def listen(self, *args):
    heavy = sorted(m for m in sys.modules if m == "anyio" or m.startswith(("anyio.", "trio"))
                   or m.endswith((".aio", ".worker", "._serve", "._api_async"))
                   or m == "jobwire._serving")
    print(heavy, flush=True)
    os._exit(0)
socket.socket.listen = listen
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_module(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize(
    "args",
    [["beanstalk_client.server", "-l", "127.0.0.1", "-p", "0"],
     ["gearman_client.server", "-L", "127.0.0.1", "-p", "0"],
     ["workq_client.server", "-listen", "127.0.0.1:0"]],
    ids=["beanstalk", "gearman", "workq"],
)
def test_the_bundled_servers_listen_before_importing_anyio_or_the_server(
    args: list[str],
) -> None:
    """They listen first (``jobwire._listen``): at the moment the socket listens, neither
    anyio nor the server's event-loop code has been imported (that import is what took
    0.12-0.46 s before the listen). Checked by what is imported, not by a clock."""
    out = subprocess.run([sys.executable, "-c", _LISTEN_PROBE, *args], capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_importing_the_server_does_not_import_the_client_or_worker() -> None:
    code = (
        "import sys, beanstalk_client.server; "
        "print(sorted(m for m in sys.modules if m.startswith('beanstalk_client.') and "
        "m.split('.')[1] in ('worker', 'aio', 'client', '_api_async', '_api_sync')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "package",
    ["jobwire", "beanstalk_client", "beanstalk_client.server", "gearman_client",
     "gearman_client.server", "workq_client", "workq_client.server", "qless_client"],
)
def test_lazy_exports_match_the_type_checking_imports(package: str) -> None:
    """Each lazily exported package lists its names as imports under TYPE_CHECKING (which
    ``jobwire._lazy`` reads at run time; parsed here with ``ast``, independently) and in
    ``__all__``: both must agree, and every name in ``__all__`` must load the very object its
    module defines."""
    module = importlib.import_module(package)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    typed: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                source = importlib.import_module(
                    "." * imp.level + (imp.module or ""), package if imp.level else None
                )
                for alias in imp.names:
                    typed[alias.name] = getattr(source, alias.name)
    constants = {name for name in module.__all__ if name not in typed}
    assert constants <= {"MAX_JOB_SIZE_LIMIT", "DEFAULT_PORT"}, constants  # the package's own
    assert set(typed) | constants == set(module.__all__)
    for name, value in typed.items():
        assert getattr(module, name) is value, name
    assert set(module.__all__) <= set(dir(module))


def test_the_type_checking_block_is_read_as_python_reads_it() -> None:
    source = (
        "x = 1\nif TYPE_CHECKING:\n    from .a import B, C as D  # comment\n\n"
        "    # a comment line\n    from pkg.e import (\n        F,\n        G as H,\n    )\n"
        "__all__ = []\n    from .late import Z\n"
    )
    assert type_checking_imports("p", source) == {
        "B": (".a", "B"), "D": (".a", "C"), "F": ("pkg.e", "F"), "H": ("pkg.e", "G"),
    }


@pytest.mark.parametrize(("block", "message"), [
    ("    import os\n", "cannot export from 'import os'"),
    ("    from .a import *\n", "cannot export"),
    ("    from .a import B\n    from .c import B\n", "'B' imported from .a and .c"),
    ("    x = 1\n", "cannot export from 'x = 1'"),
])
def test_a_block_it_cannot_read_is_an_import_error_naming_the_line(
    block: str, message: str
) -> None:
    with pytest.raises(ImportError, match=re.escape(message)):
        type_checking_imports("p", "if TYPE_CHECKING:\n" + block)
    with pytest.raises(ImportError, match="no 'if TYPE_CHECKING:' block"):
        type_checking_imports("p", "import os\n")
