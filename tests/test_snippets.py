"""Every ```` ```python ```` block of README.md and docs/*.md, as a reader copies it.

**Type-checked.** One ``mypy --strict`` run (Python 3.10 rules, the project's own packages)
over all blocks, each written to a file of its own: a block must be a whole program, with its
imports, and its calls must type-check as the API is annotated.

**Run.** Each block runs as a program (a subprocess of this Python, in an empty directory) to
its end, and must exit 0. Nothing in it is changed but the server address: a block that talks
to a running server is written against that server's documented default address, and the test
starts a fresh server of that kind for the block and puts its address in place of the default
one:

| address in the block | server started for the block |
| --- | --- |
| ``beanstalk://127.0.0.1:11300`` | the real beanstalkd |
| ``gearman://127.0.0.1:4730`` | the real gearmand |
| ``workq://127.0.0.1:9922`` | the Go ``workq-server`` when on ``PATH``, else the bundled one |
| ``redis://127.0.0.1:6379/0`` | redis-server |

A real server that is not installed skips the block (fails it under
JOBWIRE_REQUIRE_REAL_SERVERS=1). Blocks that start the bundled servers themselves
(``run_server()``) run as they are. A fresh server per block: what one block leaves in a tube
cannot change what the next one reads.

**Opting out.** A docs block that cannot be a finished program says why in an HTML comment,
the last line before it (blank lines aside): ``<!-- not run: a worker: it serves until
SIGTERM -->`` (type-checked, not run) or ``<!-- not checked: ... -->`` (neither). The
README's blocks never opt out: they are the package index's front page.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobwire.testing import (
    BeanstalkServer,
    GearmanServer,
    RedisServer,
    WorkqServer,
    find_binary,
    start_beanstalk,
    start_gearman,
    start_redis,
    start_workq,
    unavailable,
)

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```+|~~~+)[ \t]*([\w+-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
_OPT_OUT = re.compile(r"<!--\s*not (run|checked):\s*(\S.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the block's first line of code
    source: str
    skip: str | None  # "run" or "checked", from the comment before it
    reason: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def stem(self) -> str:
        """A module name of its own for mypy."""
        return re.sub(r"\W", "_", f"{self.page.stem}_{self.line}")


def blocks(page: Path) -> list[Block]:
    """The ``python`` (or ``py``) fenced blocks of ``page``, with their opt-out comments."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        if match.group(2).lower() not in ("python", "py"):
            continue
        before = [ln for ln in text[: match.start()].splitlines() if ln.strip()]
        opt = _OPT_OUT.fullmatch(before[-1].strip()) if before else None
        found.append(Block(page, text.count("\n", 0, match.start()) + 2, match.group(3),
                           opt.group(1) if opt else None, opt.group(2) if opt else ""))
    return found


ALL = [block for page in PAGES for block in blocks(page)]


def test_the_blocks_are_found_and_the_readme_never_opts_out() -> None:
    readme = [b for b in ALL if b.page.name == "README.md"]
    assert len(readme) >= 4 and len(ALL) >= 25
    assert [b.name for b in readme if b.skip is not None] == []
    # The finder reads a fence's info string from its own line only (a bare ``` followed by a
    # line starting "python" is not a python block).
    assert all(b.source.strip() for b in ALL)


# -- type-checked ---------------------------------------------------------------------------


@pytest.mark.slow
def test_every_block_type_checks_with_mypy_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        unavailable("mypy is not installed (pip install -e '.[test]')")
    checked = [b for b in ALL if b.skip != "checked"]
    files = {}
    for block in checked:
        path = tmp_path / f"{block.stem}.py"
        path.write_text(block.source)
        files[str(path)] = block
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--python-version",
         "3.10", "--cache-dir", str(tmp_path / ".mypy_cache"), *files],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr  # 2: mypy itself failed

    def where(line: str) -> str:  # "docs/x.md:LINE: error: ..." (the page's line)
        path, _, rest = line.partition(".py:")
        block = files[path + ".py"]
        number, _, message = rest.partition(":")
        return f"{block.page.relative_to(ROOT)}:{block.line + int(number) - 1}:{message}"

    errors = [where(line) for line in out.stdout.splitlines() if ": error:" in line]
    assert errors == [], "\n".join(errors)


# -- run ------------------------------------------------------------------------------------


Server = BeanstalkServer | GearmanServer | WorkqServer | RedisServer


def start_for(address: str) -> Server:
    """A fresh server for a block written against the documented default ``address``."""
    if address.startswith("beanstalk:"):
        return start_beanstalk("beanstalkd")
    if address.startswith("gearman:"):
        return start_gearman("gearmand")
    if address.startswith("workq:"):
        return start_workq(kind="workq-server" if find_binary("workq-server") else "bundled")
    return start_redis()


#: The documented default addresses (see the module docstring).
DEFAULTS = ("beanstalk://127.0.0.1:11300", "gearman://127.0.0.1:4730", "workq://127.0.0.1:9922",
            "redis://127.0.0.1:6379/0")
#: The servers' environment variables: cleared, so that only the block's own text counts.
_URL_VARIABLES = ("BEANSTALK_URL", "GEARMAN_SERVERS", "WORKQ_URL", "QLESS_URL")


@pytest.fixture
def servers() -> Iterator[Callable[[str], str]]:
    """``rewrite(source)``: ``source`` with each documented default address in it replaced by
    the address of a server started for it now; every server is stopped at teardown."""
    started: list[Server] = []

    def rewrite(source: str) -> str:
        for address in DEFAULTS:
            if address in source:
                started.append(start_for(address))
                source = source.replace(address, started[-1].url)
        return source

    yield rewrite
    for server in started:
        server.stop()


@pytest.mark.parametrize("block", [b for b in ALL if b.skip is None], ids=lambda b: b.name)
def test_the_block_runs_as_written(
    block: Block, servers: Callable[[str], str], tmp_path: Path
) -> None:
    script = tmp_path / f"{block.stem}.py"
    script.write_text(servers(block.source))
    env = {k: v for k, v in os.environ.items() if k not in _URL_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, f"{block.name}: exit {done.returncode}\n{done.stdout}\n" \
                                 f"{done.stderr[-3000:]}"
