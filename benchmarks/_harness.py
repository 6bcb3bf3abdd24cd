"""What every benchmark script here needs from the machine: free loopback ports, server
binaries, server processes that die with the benchmark and report their CPU time, and a clean
exit on SIGTERM. Imported as ``_harness`` (the scripts run from this folder)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
from types import FrameType

__all__ = [
    "HOST", "die_with_parent", "find_binary", "free_port", "proc_cpu", "proc_stat",
    "stop_process", "terminate",
]

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:  # pragma: no cover - runs in the child
    """``preexec_fn`` for a server: on Linux it gets SIGTERM if the benchmark dies without
    cleaning up (SIGKILL)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def find_binary(name: str, package: str | None = None) -> str:
    """The path of the server binary ``name`` (PATH, then /usr/bin and /usr/sbin); exits
    saying which Debian ``package`` (default: ``name``) to install when there is none."""
    for candidate in (shutil.which(name), f"/usr/bin/{name}", f"/usr/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(f"{name} is not installed (apt-get install -y {package or name})")


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) ``pid`` has used so far, or None (gone, or not Linux)."""
    fields = proc_stat(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM handler: exit through the ``finally`` blocks that stop the servers."""
    raise SystemExit(128 + signum)
