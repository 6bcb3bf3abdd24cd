"""Shared helpers of the Spark tests: draining a queue, running a stream."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

from beanstalk_client import Client, Delete, Reserved, ReserveWithTimeout

from ..waiting import wait_until

#: A streaming query's trigger interval in the tests.
TRIGGER = "0.5 seconds"


def drain_beanstalk(url: str, tube: str) -> list[bytes]:
    """Reserve and delete every ready job of ``tube``; return their bodies in reserve order."""
    bodies: list[bytes] = []
    with Client(url, timeout=30) as client:
        client.watch(tube)
        client.ignore("default") if tube != "default" else None
        while True:
            replies = client.call_many([ReserveWithTimeout(0)] * 1024)
            jobs = [r for r in replies if isinstance(r, Reserved)]
            if jobs:
                client.call_many([Delete(j.job_id) for j in jobs])
                bodies.extend(j.body for j in jobs)
            if len(jobs) < len(replies):
                return bodies


class Stream:
    """A streaming query of ``fmt`` whose batches land in ``rows`` (foreachBatch, in this
    process), with the checkpoint at ``checkpoint``."""

    def __init__(self, spark: Any, fmt: str, options: dict[str, str], checkpoint: Path) -> None:
        self.rows: list[Any] = []
        self._lock = threading.Lock()
        reader = spark.readStream.format(fmt)
        for key, value in options.items():
            reader = reader.option(key, value)
        self.query = (reader.load().writeStream.foreachBatch(self._sink)
                      .option("checkpointLocation", str(checkpoint))
                      .trigger(processingTime=TRIGGER).start())

    def _sink(self, batch: Any, batch_id: int) -> None:
        rows = batch.collect()
        with self._lock:
            self.rows.extend(rows)

    def count(self) -> int:
        with self._lock:
            return len(self.rows)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.query.stop()


def spark_error_text(exc: BaseException) -> str:
    """The whole text of an error Spark raised on the driver (the task's Python traceback is
    inside it)."""
    return str(exc)


def crash_before_commit(fmt: str, options: dict[str, str], checkpoint: Path,
                        tmp: Path) -> list[str]:
    """Run a streaming query of ``fmt`` in a subprocess, kill it (SIGKILL, whole process group)
    once its first batch reached the sink but before that batch committed; return the ids the
    batch held."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from .conftest import spark_env

    outfile = tmp / "delivered.txt"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.stream_crash", fmt, json.dumps(options),
         str(checkpoint), str(outfile)],
        cwd=root, env={**os.environ, **spark_env()}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: (outfile.exists() and outfile.read_text().endswith("END\n"))
                   or proc.poll() is not None, 120, "the crashing driver's first batch")
        if proc.poll() is not None:
            raise AssertionError(f"the driver exited early: {proc.stderr.read()!r}")  # type: ignore[union-attr]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return outfile.read_text().split("\n")[:-2]


class CountingProxy:
    """A TCP proxy on loopback in front of ``(host, port)`` that records what each client
    connection sent upstream: how many connections, and the command lines of all of them."""

    def __init__(self, host: str, port: int) -> None:
        import socket

        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sent: list[bytearray] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._sent)

    def lines(self) -> list[bytes]:
        """Every CRLF-terminated line clients sent (payload lines included)."""
        with self._lock:
            return [line for sent in self._sent for line in bytes(sent).split(b"\r\n")]

    def _accept(self) -> None:
        import socket

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            sent = bytearray()
            with self._lock:
                self._sent.append(sent)
            threading.Thread(target=self._pump, args=(client, server, sent), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, None), daemon=True).start()

    def _pump(self, source: Any, sink: Any, record: bytearray | None) -> None:
        import socket

        try:
            while data := source.recv(65536):
                if record is not None:
                    with self._lock:
                        record.extend(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
