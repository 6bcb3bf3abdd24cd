"""One worker shape across the four packages: ``run()`` serves until ``stop()`` (SIGTERM and
SIGINT too, with ``handle_signals``), ``shutdown_timeout`` bounds a graceful stop, ``stats``
counts with the same names where the idea is the same, and a misspelt keyword is refused at
construction and by mypy. (What each worker does is tested in ``tests/<package>/``; the
signals in ``tests/workers/test_signals.py``.)"""

from __future__ import annotations

import dataclasses
import inspect
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import beanstalk_client
import gearman_client
import qless_client
import workq_client
from jobwire._signals import stop_on_signals
from tests.waiting import wait_until

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


#: Workers as built, and the ``repr`` each shows: its server as a URL (never a password) and
#: its shape, as the clients show theirs (docs/names.md).
REPRS: list[tuple[Any, tuple[Any, ...], dict[str, Any], str]] = [
    (beanstalk_client.Worker, ("beanstalk://127.0.0.1:11301",),
     {"tubes": ("emails", "sms"), "concurrency": 8},
     "<beanstalk_client.Worker beanstalk://127.0.0.1:11301 tubes=['emails', 'sms'] "
     "concurrency=8>"),
    (beanstalk_client.Worker, ("127.0.0.1",), {"ssl": True},
     "<beanstalk_client.Worker beanstalk://127.0.0.1:11300 tubes=['default'] concurrency=1 "
     "tls>"),
    (beanstalk_client.AsyncWorker, ("/run/beanstalkd.sock",), {"tubes": ["t"]},
     "<beanstalk_client.AsyncWorker unix:///run/beanstalkd.sock tubes=['t'] concurrency=1>"),
    (gearman_client.Worker, (["10.0.0.1", "10.0.0.2:4731"],),
     {"client_id": "w-1", "concurrency": 4},
     "<gearman_client.Worker gearman://10.0.0.1:4730,gearman://10.0.0.2:4731 client_id='w-1' "
     "concurrency=4>"),
    (gearman_client.AsyncWorker, ("127.0.0.1",), {"ssl": True},
     "<gearman_client.AsyncWorker gearman://127.0.0.1:4730 concurrency=1 tls>"),
    (workq_client.Worker, ("127.0.0.1", ["resize", "thumb"]), {"concurrency": 2},
     "<workq_client.Worker workq://127.0.0.1:9922 names=['resize', 'thumb'] concurrency=2>"),
    (workq_client.AsyncWorker, ("workq://10.1.2.3:7000", "q"), {"ssl": True},
     "<workq_client.AsyncWorker workq://10.1.2.3:7000 names=['q'] concurrency=1 tls>"),
    (qless_client.Worker, ("redis://alice:s3cret@127.0.0.1:6380/2",),
     {"queues": ["a", "b"], "mode": "round-robin", "worker_name": "w-1"},
     "<qless_client.Worker redis://127.0.0.1:6380/2 queues=['a', 'b'] mode='round-robin' "
     "concurrency=1 worker='w-1'>"),
    (qless_client.AsyncWorker, ("rediss://127.0.0.1:6390",),
     {"queues": ["q"], "worker_name": "w-2", "concurrency": 3},
     "<qless_client.AsyncWorker rediss://127.0.0.1:6390 queues=['q'] concurrency=3 "
     "worker='w-2'>"),
    (qless_client.AsyncWorker, ("127.0.0.1", 6381),
     {"queues": ["q"], "worker_name": "w-3", "password": "s3cret", "ssl": True},
     "<qless_client.AsyncWorker redis://127.0.0.1:6381 tls queues=['q'] concurrency=1 "
     "worker='w-3'>"),
]


@pytest.mark.parametrize(("cls", "args", "kwargs", "shown"), REPRS,
                         ids=[f"{c.__module__.split('.')[0]}.{c.__name__}-{i}"
                              for i, (c, *_) in enumerate(REPRS)])
def test_every_worker_shows_its_server_in_its_repr(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], shown: str
) -> None:
    worker = cls(*args, **kwargs)
    assert repr(worker) == shown
    assert "s3cret" not in repr(worker)


def test_the_worker_repr_covers_every_worker_class() -> None:
    assert {cls for cls, *_ in REPRS} == {cls for cls, _, _ in WORKERS.values()}


def test_a_worker_given_a_client_shows_the_clients_server() -> None:
    # Neither async client connects before it is used.
    client = beanstalk_client.AsyncClient("beanstalk://127.0.0.1:11302")
    assert repr(beanstalk_client.AsyncWorker(client, tubes=["t"])) == (
        "<beanstalk_client.AsyncWorker beanstalk://127.0.0.1:11302 tubes=['t'] concurrency=1>"
    )
    qless = qless_client.AsyncClient("redis://bob:hunter2@127.0.0.1:6382/4", worker_name="w-4")
    assert repr(qless_client.AsyncWorker(qless, queues=["q"])) == (
        "<qless_client.AsyncWorker redis://127.0.0.1:6382/4 queues=['q'] concurrency=1 "
        "worker='w-4'>"
    )


def test_a_gearman_worker_shows_the_functions_it_registered() -> None:
    worker = gearman_client.Worker("127.0.0.1")
    worker.register("resize", lambda job: None)
    worker.register(b"thumb", lambda job: None)
    assert repr(worker) == (
        "<gearman_client.Worker gearman://127.0.0.1:4730 functions=['resize', 'thumb'] "
        "concurrency=1>"
    )
    worker.unregister("resize")
    assert "functions=['thumb']" in repr(worker)


# -- signals --------------------------------------------------------------------------------------


def test_stop_on_signals_calls_back_and_puts_the_old_handlers_back() -> None:
    got: list[int] = []
    old = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with stop_on_signals(got.append):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        # Python runs the handlers in the main thread, soon
        wait_until(lambda: len(got) >= 2, 10, "both handlers to run")
    assert got == [signal.SIGTERM, signal.SIGINT]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == old


def test_stop_on_signals_outside_the_main_thread_is_refused_and_changes_nothing() -> None:
    old = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    errors: list[BaseException] = []

    def install() -> None:
        try:
            with stop_on_signals(lambda signum: None):
                pass
        except ValueError as exc:
            errors.append(exc)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == old


@pytest.mark.parametrize("name", list(WORKERS))
def test_no_worker_keeps_a_copy_of_the_signal_watch(name: str) -> None:
    """SIGTERM/SIGINT handling lives in jobwire._signals, used by all four packages."""
    cls = WORKERS[name][0]
    source = inspect.getsource(sys.modules[cls.__module__])
    assert "open_signal_receiver" not in source and "signal.signal(" not in source
    assert "from jobwire._signals import" in source
