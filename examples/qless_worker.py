"""qless on Redis: put jobs, a worker pops and completes them, one fails for a while and is
retried, one fails for good; then the queue's statistics.

    python examples/qless_worker.py [URL]

URL defaults to $QLESS_URL, else ``redis://127.0.0.1:6379/0``: any Redis 7 (qless is Lua
scripts inside Redis, loaded by the client; there is no other server).

1. ``put_many`` puts 10 e-mails on the ``emails`` queue, pipelined, and ``put`` two more: one
   whose mail server is "busy" on the first try, one with a bad address.
2. A ``Worker`` (4 threads, one Redis connection) pops them and runs ``send_email``: returning
   completes a job; raising fails it, unless ``RetryPolicy`` lists the exception: then the job
   is retried (here at once; each retry uses one of its ``retries``, 5 by default), so the busy
   one is popped again and completes. The bad address fails for good: a failed job stays in
   Redis, by failure group (the exception's type), until someone retries or cancels it.
3. A watcher thread stops the worker once the queue is empty (``worker.stop()``).
4. It prints the queue's counts, the failures by group, and today's statistics, which the
   script keeps as the jobs go: wait and run times, failures, retries.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from qless_client import Client, Job, RetryPolicy, Worker

QUEUE = "emails"
KLASS = "app.SendEmail"  # what the job is: workers of other languages dispatch on it
log = logging.getLogger("qless_worker")  # logging writes whole lines, whatever the threads


class MailServerBusy(Exception):
    """A failure worth trying again: the worker retries these (see RetryPolicy below)."""


def send_email(job: Job) -> None:
    """The handler, in a worker thread: return to complete the job, raise to fail it."""
    message = job.data
    first_try = job.remaining == job.retries  # no retry used yet
    if message.get("busy") and first_try:
        raise MailServerBusy(f"{message['to']}: 421 try again later")
    if "@" not in message["to"]:
        raise ValueError(f"not an address: {message['to']!r}")
    time.sleep(0.02)  # the SMTP call would go here
    log.info("job %s: sent %r to %s", job.jid, message["subject"], message["to"])


def stop_when_empty(worker: Worker, url: str) -> None:
    """Stop ``worker`` once the queue has no job waiting, scheduled or running."""
    with Client(url) as client:
        queue = client.queue(QUEUE)
        while queue.length() > 0:
            time.sleep(0.2)
    worker.stop()  # from any thread: running handlers finish, then run() returns


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "QLESS_URL", "redis://127.0.0.1:6379/0")
    # Our lines, and the worker's warnings (logger "qless_client.worker").
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)

    with Client(url) as client:
        queue = client.queue(QUEUE)
        jids = queue.put_many(
            (KLASS, {"to": f"reader{n}@example.com", "subject": "Our November news"})
            for n in range(10)
        )
        busy = queue.put(KLASS, {"to": "ana@example.com", "subject": "Welcome!", "busy": True},
                         priority=-10)  # lower runs sooner
        bad = queue.put(KLASS, {"to": "nobody", "subject": "Hello"}, tags=["suspect"])
        print(f"put {len(jids) + 2} jobs; busy one {busy}, bad one {bad}")

    worker = Worker(url, queues=[QUEUE], concurrency=4, idle_wait=0.2,
                    retry=RetryPolicy(retry_on=(MailServerBusy,), base_delay=0))
    watcher = threading.Thread(target=stop_when_empty, args=(worker, url), daemon=True)
    watcher.start()
    worker.run(send_email)  # blocks until worker.stop(), Ctrl-C or SIGTERM
    stats = worker.stats
    print(f"worker: popped {stats.popped}, completed {stats.completed}, "
          f"retried {stats.retried}, failed {stats.failed}")

    with Client(url) as client:
        queue = client.queue(QUEUE)
        print("counts:", queue.counts())
        print("failed by group:", client.failed())  # e.g. {'ValueError': 1}
        today = queue.stats()
        print(f"today: {today['run']['count']} runs, mean "
              f"{today['run']['mean'] * 1000:.1f} ms; {today['wait']['count']} waits, mean "
              f"{today['wait']['mean'] * 1000:.1f} ms; {today['failures']} failures, "
              f"{today['retries']} retries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
