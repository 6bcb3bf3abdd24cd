"""Workq: ``run`` a job and wait for its result, or ``add`` it and fetch the result later; a
worker (in a thread of this program) answers.

    python examples/workq_run_result.py [URL]

URL defaults to $WORKQ_URL, else ``workq://127.0.0.1:9922``: the bundled server
(``python -m workq_client.server``), or Workq's own.

The worker leases jobs named ``reverse`` and answers each with its payload reversed; a handler
that raises fails the job, with ``"<Type>: <message>"`` as its result. The client:

1. ``run``: adds a job and waits for its result, in one command (the RPC style);
2. ``add``, then ``result``: queues a job now (its id comes back at once) and collects the
   result later, from this or any other connection, until the job's TTL runs out;
3. the same with a payload the handler refuses: the result says it failed, and why.

Then ``worker.stop()``: the worker leases nothing more and ``run()`` returns once its running
jobs are reported. The ids are printed: ``result`` still answers for them afterwards.
"""

from __future__ import annotations

import os
import sys
import threading

from workq_client import Client, JobContext, Worker

NAME = "reverse"


def reverse(job: JobContext) -> bytes:
    """The handler: return the result (``complete``), or raise (``fail``)."""
    if not job.payload.isalpha():
        raise ValueError(f"not a word: {job.payload!r}")
    return job.payload[::-1]


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "WORKQ_URL", "workq://127.0.0.1:9922")

    worker = Worker(url, [NAME], concurrency=2)
    thread = threading.Thread(target=worker.run, args=(reverse,))
    thread.start()
    try:
        with Client(url, timeout=30) as client:
            # 1. run: add and wait, up to `wait` s for a worker to lease it, then up to `ttr` s.
            record = client.run(NAME, b"stressed", ttr=5, wait=10)
            print(f"run {record.job_id}: success={record.success} data={record.data!r}")

            # 2. add now, get the result later (kept for `ttl` seconds).
            job_id = client.add(NAME, b"drawer", ttr=5, ttl=600)
            print(f"added {job_id}")
            record = client.result(job_id, wait=10)  # waits up to 10 s for the worker
            print(f"result {job_id}: success={record.success} data={record.data!r}")

            # 3. a job the handler fails.
            job_id = client.add(NAME, b"42", ttr=5, ttl=600)
            record = client.result(job_id, wait=10)
            print(f"result {job_id}: success={record.success} data={record.data!r}")

            queue = client.inspect_queue(NAME)
            print(f"queue {NAME!r}: {queue.ready_len} ready, {queue.scheduled_len} scheduled")
    finally:
        worker.stop()  # from any thread
        thread.join()
    print(f"worker: {worker.stats.completed} completed, {worker.stats.failed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
