"""One worker shape across the four packages: ``run()`` serves until ``stop()`` (SIGTERM and
SIGINT too, with ``handle_signals``), ``shutdown_timeout`` bounds a graceful stop, ``stats``
counts with the same names where the idea is the same, and a misspelt keyword is refused at
construction and by mypy. (What each worker does is tested in ``tests/<package>/``; the
signals in ``tests/<package>/test_worker_signals.py``.)"""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client

ROOT = Path(__file__).resolve().parents[1]

#: Each package's worker classes and the arguments that build one (no connection is opened).
WORKERS: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {
    "beanstalk.Worker": (beanstalk_client.Worker, ("127.0.0.1",), {"tubes": ["t"]}),
    "beanstalk.AsyncWorker": (beanstalk_client.AsyncWorker, ("127.0.0.1",), {"tubes": ["t"]}),
    "gearman.Worker": (gearman_client.Worker, ("127.0.0.1",), {}),
    "gearman.AsyncWorker": (gearman_client.AsyncWorker, ("127.0.0.1",), {}),
    "workq.Worker": (workq_client.Worker, ("127.0.0.1", "q"), {}),
    "workq.AsyncWorker": (workq_client.AsyncWorker, ("127.0.0.1", "q"), {}),
    "qless.Worker": (qless_client.Worker, ("127.0.0.1",), {"queues": ["q"]}),
    "qless.AsyncWorker": (qless_client.AsyncWorker, ("127.0.0.1",), {"queues": ["q"]}),
}
#: What each protocol calls taking a job, and finishing it well (its own vocabulary).
TAKEN = {"beanstalk": "reserved", "gearman": "grabbed", "workq": "leased", "qless": "popped"}
DONE = {"beanstalk": "deleted", "gearman": "completed", "workq": "completed",
        "qless": "completed"}


@pytest.mark.parametrize("name", list(WORKERS))
def test_every_worker_has_the_same_shape(name: str) -> None:
    cls, args, kwargs = WORKERS[name]
    package = name.split(".")[0]
    worker = cls(*args, **kwargs)
    run = inspect.signature(cls.run)
    # A handler per function is Gearman's own idea (register); the others take it in run().
    positional = [p for p in run.parameters.values()
                  if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"]
    assert [p.name for p in positional] == ([] if package == "gearman" else ["handler"])
    signals = run.parameters["handle_signals"]
    assert (signals.kind, signals.default) == (inspect.Parameter.KEYWORD_ONLY, None)
    assert callable(worker.stop)
    init = inspect.signature(cls.__init__).parameters
    assert init["shutdown_timeout"].default == 30.0
    assert not any(p.kind is p.VAR_KEYWORD and p.annotation in ("Any", Any)
                   for p in init.values()), "keywords must be typed"
    fields = {f.name for f in dataclasses.fields(worker.stats)}
    assert {TAKEN[package], DONE[package], "failed", "lost", "reconnects", "in_flight"} <= fields
    assert worker.stats.in_flight == 0


@pytest.mark.parametrize("name", list(WORKERS))
def test_a_misspelt_keyword_is_a_type_error_at_construction(name: str) -> None:
    cls, args, kwargs = WORKERS[name]
    with pytest.raises(TypeError, match="concurency"):
        cls(*args, **kwargs, concurency=8)


@pytest.mark.slow
def test_mypy_refuses_a_misspelt_keyword_and_a_fractional_beanstalk_delay(
    tmp_path: Path,
) -> None:
    lines = ["import beanstalk_client, gearman_client, qless_client, workq_client"]
    for name, (_cls, args, kwargs) in WORKERS.items():
        package, cls_name = name.split(".")
        call_args = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        lines.append(f"{package}_client.{cls_name}({call_args}, concurency=8)")
    lines.append("beanstalk_client.RetryPolicy(base_delay=0.1)")
    snippet = tmp_path / "snippet.py"
    snippet.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", str(snippet)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    misspelt = [e for e in errors if 'Unexpected keyword argument "concurency"' in e]
    assert len(misspelt) == len(WORKERS), proc.stdout
    assert any('"base_delay"' in e and '"int"' in e for e in errors), proc.stdout
    assert len(errors) == len(WORKERS) + 1, proc.stdout
