"""A beanstalk producer: put jobs on a tube, one by one with their own priority and delay, and
the rest in one pipelined ``put_many``.

    python examples/producer.py [URL] [--jobs FILE.jsonl]

URL defaults to $BEANSTALK_URL, else ``beanstalk://127.0.0.1:11300``: where beanstalkd, or the
bundled server (``python -m beanstalk_client.server``), listens by default.

Each job is a JSON object, and becomes the job's body. ``--jobs`` reads them from a JSON-lines
file (one object a line); without it, a built-in list of e-mails is put. Two keys are options,
not body: ``"priority"`` (0 is the most urgent; the default is 1024) and ``"delay"`` (seconds
before the job can be reserved). Jobs with either are put one at a time with ``put``; the others
all at once with ``put_many``, which sends them pipelined (256 in flight) instead of waiting for
each reply in turn. The workers in ``async_worker_pool.py`` and ``sync_worker.py`` take them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from beanstalk_client import Client

TUBE = "emails"

SAMPLE: list[dict[str, Any]] = [
    # An alert goes first: priority 0 is reserved before every job of a larger number.
    {"to": "ops@example.com", "subject": "Disk 95% full on db-1", "priority": 0},
    # A reminder for later: delayed jobs stay out of reach until the delay has passed.
    {"to": "ana@example.com", "subject": "Your trial ends tomorrow", "delay": 3600},
    # A newsletter: plain jobs, default priority, sent in one pipelined batch.
    *({"to": f"reader{n}@example.com", "subject": "Our November news"} for n in range(20)),
]


def load_jobs(path: Path | None) -> list[dict[str, Any]]:
    """The jobs: one JSON object per non-blank line of ``path``, or the built-in sample."""
    if path is None:
        return SAMPLE
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?",
                        default=os.environ.get("BEANSTALK_URL", "beanstalk://127.0.0.1:11300"))
    parser.add_argument("--jobs", type=Path, help="a JSON-lines file of jobs")
    args = parser.parse_args()

    jobs = load_jobs(args.jobs)
    with Client(args.url, timeout=10) as client:
        client.use(TUBE)  # every put below goes to this tube

        batch: list[bytes] = []
        for job in jobs:
            body = {key: value for key, value in job.items() if key not in ("priority", "delay")}
            encoded = json.dumps(body).encode()
            if "priority" in job or "delay" in job:
                # One job with its own options; ttr: seconds a worker has before it is retaken.
                job_id = client.put(encoded, priority=job.get("priority", 1024),
                                    delay=job.get("delay", 0), ttr=60)
                print(f"put job {job_id}: priority {job.get('priority', 1024)}, "
                      f"delay {job.get('delay', 0)} s: {body}")
            else:
                batch.append(encoded)

        # The rest in one go: pipelined, every reply read; the ids come back in order.
        ids = client.put_many(batch, priority=1024, ttr=60)
        if ids:
            print(f"put_many: {len(ids)} jobs, ids {ids[0]}..{ids[-1]}")

        stats = client.stats_tube(TUBE)
        print(f"tube {TUBE!r}: {stats['current-jobs-ready']} ready "
              f"({stats['current-jobs-urgent']} urgent), "
              f"{stats['current-jobs-delayed']} delayed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
