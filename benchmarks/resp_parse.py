"""RESP reply parsing alone: jobwire's pure-Python core against hiredis' C ``Reader`` (when it
is installed), in client CPU microseconds per reply. The figures decide whether a hiredis
backend would be worth having (docs/qless.md, "hiredis").

    .venv/bin/python benchmarks/resp_parse.py
"""

from __future__ import annotations

import json
import time

from qless_client._resp import Connection

N = 20_000


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
    "integer (put's reply to a counter)": b":12345\r\n",
    "one bulk string (a pop of one job)": _bulk(_job()),
    "array of 10 bulk strings": b"*10\r\n" + _bulk(b"x" * 40) * 10,
}


def jobwire_us(data: bytes) -> float:
    """CPU per reply for the core, less the cost of the command that must precede it."""
    core = Connection()
    began = time.process_time()
    for _ in range(N):
        core.send([b"PING"])
    send = time.process_time() - began
    core = Connection()
    began = time.process_time()
    for _ in range(N):
        core.send([b"PING"])
        core.receive_data(data)
        core.next_event()
    return (time.process_time() - began - send) / N * 1e6


def hiredis_us(data: bytes) -> float | None:
    try:
        import hiredis
    except ImportError:
        return None
    reader = hiredis.Reader()
    began = time.process_time()
    for _ in range(N):
        reader.feed(data)
        reader.gets()
    return (time.process_time() - began) / N * 1e6


def main() -> None:
    print("| reply | jobwire µs | hiredis µs |\n|---|--:|--:|")
    for name, data in CASES.items():
        hi = hiredis_us(data)
        shown = "not installed" if hi is None else f"{hi:.2f}"
        print(f"| {name} | {jobwire_us(data):.2f} | {shown} |")


if __name__ == "__main__":
    main()
