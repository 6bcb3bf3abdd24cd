"""Handlers that ``jobwire worker`` runs in tests/cli/test_worker_command.py, by import path
(``tests.cli.handlers:record``...), in the worker's own process.

They leave what they did as files in ``$JOBWIRE_TEST_OUT`` (one file per event, written whole:
the test reads them from another process): ``done-<payload>`` when a handler finished a job,
``started-<payload>`` when a gated one began. A gated handler then waits until the test creates
``go`` in that directory.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio


def _out() -> Path:
    return Path(os.environ["JOBWIRE_TEST_OUT"])


def payload(job: Any) -> str:
    """The job's body as text, whichever system's job it is (beanstalk ``body``, Gearman
    ``data``, Workq ``payload``, qless ``data``, a dict ``{"p": text}``)."""
    for name in ("body", "payload", "data"):
        value = getattr(job, name, None)
        if value is None:
            continue
        if isinstance(value, dict):
            return str(value["p"])
        return value.decode() if isinstance(value, bytes) else str(value)
    raise AssertionError(f"no payload on {job!r}")


def _mark(kind: str, job: Any, what: str = "") -> None:
    path = _out() / f"{kind}-{payload(job)}"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(what or json.dumps({"pid": os.getpid(), "type": type(job).__name__}))
    tmp.replace(path)


def record(job: Any) -> None:
    """A sync handler: marks the job done."""
    _mark("done", job)


async def arecord(job: Any) -> None:
    """An async handler: marks the job done."""
    await anyio.sleep(0)
    _mark("done", job)


class Recorder:
    """An object whose ``__call__`` is async."""

    async def __call__(self, job: Any) -> None:
        await anyio.sleep(0)
        _mark("done", job)


arecorder = Recorder()


def gate(job: Any) -> None:
    """A sync handler that marks the job started and waits for ``go`` before marking it
    done."""
    _mark("started", job)
    while not (_out() / "go").exists():
        time.sleep(0.01)
    _mark("done", job)


async def agate(job: Any) -> None:
    """:func:`gate`, async."""
    _mark("started", job)
    while not (_out() / "go").exists():
        await anyio.sleep(0.01)
    _mark("done", job)


def boom(job: Any) -> None:
    """Always raises ValueError."""
    raise ValueError(f"boom {payload(job)}")


not_callable = 42
