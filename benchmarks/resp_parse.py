"""RESP reply parsing alone: jobwire's pure-Python core against hiredis' C ``Reader`` (when it
is installed), in client CPU microseconds per reply. The figures decide whether a hiredis
backend would be worth having (docs/qless.md, "hiredis: measured, not used").

    .venv/bin/python benchmarks/resp_parse.py             # 5 runs, about 3 s of CPU
    .venv/bin/python benchmarks/resp_parse.py --quick     # 3 runs (results/quick/)
    .venv/bin/python benchmarks/resp_parse.py --runs 7 --out /tmp/resp_parse.json

The runs are interleaved: each run times every reply with jobwire's core, then with hiredis.
Each figure is the median of the runs, with the lowest and the highest; the JSON
(``benchmarks/results/resp_parse.json`` by default) keeps every run. ``table()`` prints the
table docs/qless.md shows (``tests/docs/test_figures.py`` checks that the page says it).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from qless_client._resp import Connection

N = 20_000
PARSERS = ("jobwire", "hiredis")


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _job() -> bytes:
    """A pop reply's JSON as our script sends it (one job)."""
    return json.dumps([{
        "jid": "a" * 32, "klass": "app.SendEmail", "state": "running", "queue": "emails",
        "data": json.dumps({"to": "someone@example.com", "n": 1}), "worker": "host-1234",
        "history": [{"what": "put", "when": 1.7e9, "q": "emails"}], "tags": [], "priority": 0,
        "expires": 1.7e9, "retries": 5, "remaining": 5, "failure": {}, "dependents": [],
        "dependencies": [], "tracked": False,
    }]).encode()


CASES = {
    "integer": b":12345\r\n",
    "one bulk string (a pop of one job)": _bulk(_job()),
    "array of 10 bulk strings": b"*10\r\n" + _bulk(b"x" * 40) * 10,
}


def jobwire_us(data: bytes, n: int = N) -> float:
    """CPU per reply for the core, less the cost of the command that must precede it."""
    core = Connection()
    began = time.process_time()
    for _ in range(n):
        core.send([b"PING"])
    send = time.process_time() - began
    core = Connection()
    began = time.process_time()
    for _ in range(n):
        core.send([b"PING"])
        core.receive_data(data)
        core.next_event()
    return (time.process_time() - began - send) / n * 1e6


def hiredis_us(data: bytes, n: int = N) -> float | None:
    try:
        import hiredis
    except ImportError:
        return None
    reader = hiredis.Reader()
    began = time.process_time()
    for _ in range(n):
        reader.feed(data)
        reader.gets()
    return (time.process_time() - began) / n * 1e6


def measure(runs: int, n: int = N) -> list[dict[str, Any]]:
    """``runs`` interleaved runs of every (reply, parser): one row per pair, with its samples,
    median, lowest and highest. hiredis has no row when it is not installed."""
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        for name, data in CASES.items():
            for parser, timer in (("jobwire", jobwire_us), ("hiredis", hiredis_us)):
                value = timer(data, n)
                if value is not None:
                    samples.setdefault((name, parser), []).append(value)
    return [{"reply": name, "parser": parser, "median": statistics.median(values),
             "min": min(values), "max": max(values), "samples": values}
            for (name, parser), values in samples.items()]


def fmt(value: float) -> str:
    """µs: two decimals under 10, one above."""
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def table(document: Mapping[str, Any]) -> str:
    """The markdown table of ``document``: per reply, each parser's median (lowest-highest)."""
    rows: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in document["results"]:
        rows.setdefault(row["reply"], {})[row["parser"]] = row
    version = document["environment"]["packages"].get("hiredis")
    lines = [f"| reply | jobwire µs | hiredis {version or '(not installed)'} µs |",
             "|---|--:|--:|"]
    for reply, parsers in rows.items():
        cells = [f"{fmt(p['median'])} ({fmt(p['min'])}-{fmt(p['max'])})" if p else "-"
                 for p in (parsers.get(name) for name in PARSERS)]
        lines.append(f"| {reply} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    from _harness import environment, run_arguments, runs_and_out  # this folder (a script)

    parser = run_arguments("resp_parse", __doc__.split("\n")[0], quick="the same sizes")
    parser.add_argument("--replies", type=int, default=N,
                        help=f"replies parsed per run and parser ({N:,})")
    args = parser.parse_args(argv)
    runs, out = runs_and_out(args, "resp_parse")
    if args.replies < 1:
        parser.error("--replies must be >= 1")

    document: dict[str, Any] = {
        "protocol": "resp_parse",
        "environment": environment({}, ["hiredis"]),
        "config": {
            "runs": runs, "quick": args.quick, "replies": args.replies,
            "statistic": "median of interleaved runs (each run times every reply with each "
                         "parser); the lowest and highest run as the spread",
            "unit": "client CPU µs per reply (time.process_time)",
        },
        "results": measure(runs, args.replies),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(document))
    print(f"results written to {out}")


if __name__ == "__main__":
    main()
