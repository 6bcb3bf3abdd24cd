"""Running the ``jobwire`` command as a user does: a subprocess (``python -m jobwire``), and,
for ``top``, a real terminal (a tmux pane) whose screen is read back."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pytest

from ..waiting import wait_until

#: tmux on a socket of its own, so the suite never touches a user's tmux sessions.
TMUX = ("tmux", "-L", "jobwire-tests")

#: Environment defaults the tests must not inherit from the machine.
_URL_VARS = ("BEANSTALK_URL", "GEARMAN_SERVERS", "WORKQ_URL", "QLESS_URL")


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _URL_VARS}
    env.update({"COLUMNS": "160", "NO_COLOR": "1", "TERM": "dumb"})
    env.update(extra or {})
    return env


def run_cli(
    *args: str, input: bytes | str | None = None, env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python -m jobwire ARGS`` with ``input`` on stdin (bytes exactly as given, text as
    UTF-8); stdout/stderr as UTF-8 text, bytes that are not UTF-8 kept as surrogates
    (``out.stdout.encode("utf-8", "surrogateescape")`` gives the bytes back)."""
    data = input.encode() if isinstance(input, str) else input
    done = subprocess.run(
        [sys.executable, "-m", "jobwire", *args], input=data, capture_output=True,
        env=cli_env(env), timeout=timeout,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8", "surrogateescape"),
        done.stderr.decode("utf-8", "surrogateescape"),
    )


@dataclass
class Terminal:
    """A tmux pane running one command, 160x48 (on the suite's own tmux socket)."""

    session: str

    def screen(self) -> str:
        return subprocess.run(
            [*TMUX, "capture-pane", "-p", "-t", self.session], capture_output=True, text=True,
            check=True,
        ).stdout

    def wait_for(self, text: str, timeout: float = 20) -> str:
        """The screen, once it shows ``text`` (fails with the last screen after ``timeout``:
        a behaviour bound, not a speed check)."""
        def shown() -> str:
            screen = self.screen()
            assert text in screen, f"the screen was:\n{screen}"
            return screen

        return wait_until(shown, timeout, f"{text!r} on the screen", ignoring=(AssertionError,),
                          interval=0.1)

    def keys(self, *keys: str) -> None:
        subprocess.run([*TMUX, "send-keys", "-t", self.session, *keys], check=True)

    def alive(self) -> bool:
        return subprocess.run([*TMUX, "has-session", "-t", self.session],
                              capture_output=True).returncode == 0


@pytest.fixture
def terminal() -> Iterator[Callable[..., Terminal]]:
    """``terminal(*args, env=...)`` starts ``python -m jobwire ARGS`` in a fresh tmux pane;
    every pane is killed at teardown."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (apt-get install -y tmux)")
    sessions: list[str] = []

    def start(*args: str, env: Mapping[str, str] | None = None) -> Terminal:
        name = f"jobwire-{uuid.uuid4().hex[:8]}"
        environment = cli_env(env)
        environment.pop("COLUMNS")  # the pane's own size
        environment["TERM"] = "xterm-256color"
        # The environment goes on the command line: a running tmux server would not pass ours.
        # -u: the tmux server's own environment (copied from whatever process started it, here
        # with COLUMNS=80 LINES=24) would otherwise fix the size rich draws at.
        command = shlex.join(["env", "-u", "COLUMNS", "-u", "LINES",
                              *(f"{k}={v}" for k, v in environment.items()),
                              sys.executable, "-m", "jobwire", *args])
        # After the command ends the pane prints its exit status and stays up to be read.
        subprocess.run(
            [*TMUX, "new-session", "-d", "-s", name, "-x", "160", "-y", "48",
             f"{command}; echo EXIT=$?; sleep 60"],
            check=True,
        )
        sessions.append(name)
        return Terminal(name)

    yield start
    for name in sessions:
        subprocess.run([*TMUX, "kill-session", "-t", name], capture_output=True)




def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that exited 0."""
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout


def failed(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The one-line error of a command that exited with ``code``."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jobwire: error: "), result.stderr
    return lines[0]


def row(screen: str, name: str) -> list[str]:
    """The cells of the table row whose first cell is ``name`` (``name`` included)."""
    for line in screen.splitlines():
        cells = [c.strip() for c in line.split("\u2502")][1:-1]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name!r} on the screen:\n{screen}")


def wait_row(pane: Terminal, name: str, cells: list[str], timeout: float = 20) -> None:
    """Wait until the row ``name`` on the pane's screen starts with ``cells`` (after the
    name); fail with the last screen after ``timeout`` (a behaviour bound)."""
    def shown() -> bool:
        screen = pane.screen()
        assert row(screen, name)[1:1 + len(cells)] == cells, f"the screen was:\n{screen}"
        return True

    wait_until(shown, timeout, f"row {name!r} showing {cells}", ignoring=(AssertionError,),
               interval=0.1)
