"""A bundled server's process keeps its old objects out of full collections, and still frees
the cycles among them once it is quiet (``jobwire._heap``; issue 19: a flooded server holding
hundreds of thousands of jobs stopped 50-150 ms at a time for full collections).

The collector's state belongs to a process, so each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

SCRIPT = textwrap.dedent('''
    import gc, json, time, weakref
    from jobwire._heap import freeze_survivors

    reclaimer = freeze_survivors()
    stored = [[n] for n in range(200_000)]  # long-lived tracked objects, as stored jobs are

    class Node:
        pass

    node = Node()
    node.me = node  # a cycle: only the collector frees it
    dead = weakref.ref(node)
    gc.collect(1)  # what survives a generation-1 collection is frozen
    frozen = gc.get_freeze_count()
    left_in_old = len(gc.get_objects(generation=2))
    del node
    gc.collect()  # a full collection now skips the frozen objects, the cycle among them
    kept_by_full = dead() is not None
    deadline = time.monotonic() + 60
    while reclaimer.reclaims == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # quiet: the policy's thread gives the whole heap back
    print(json.dumps({"frozen": frozen, "left_in_old": left_in_old,
                      "kept_by_full": kept_by_full, "reclaims": reclaimer.reclaims,
                      "freed_after_reclaim": dead() is None, "stored": len(stored)}))
''')


def _run(script: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_old_objects_are_frozen_and_cycles_among_them_freed_when_quiet() -> None:
    result = _run(SCRIPT)
    assert result["frozen"] >= 200_000
    assert result["left_in_old"] < 1_000  # a full collection has almost nothing to scan
    assert result["kept_by_full"] is True  # frozen: not the collector's until the reclaim
    assert result["reclaims"] >= 1
    assert result["freed_after_reclaim"] is True


def test_without_the_policy_full_collections_scan_everything() -> None:
    """The control: the same heap without freeze_survivors() stays in the old generation."""
    script = SCRIPT.replace("reclaimer = freeze_survivors()",
                            "class R:\n    reclaims = -1\nreclaimer = R()")
    script = script.replace("while reclaimer.reclaims == 0", "while False")
    result = _run(script)
    assert result["frozen"] == 0
    assert result["left_in_old"] >= 200_000
    assert result["kept_by_full"] is False


@pytest.mark.parametrize(("module", "args"), [
    ("beanstalk_client.server", ["-l", "127.0.0.1", "-p", "0"]),
    ("gearman_client.server", ["-L", "127.0.0.1", "-p", "0"]),
    ("workq_client.server", ["-listen", "127.0.0.1:0"]),
])
def test_each_server_process_installs_the_policy(module: str, args: list[str]) -> None:
    """The server's ``__main__`` (run as ``python -m`` runs it) installs the policy (its gc
    callback) before it serves; a watcher in the same process reports it, then ends the
    process."""
    script = textwrap.dedent(f"""
        import gc, os, runpy, sys, threading, time
        def watch():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if any(type(getattr(c, "__self__", None)).__name__ == "Reclaimer"
                       for c in gc.callbacks):
                    print("installed", flush=True)
                    os._exit(0)
                time.sleep(0.01)
            print("missing", flush=True)
            os._exit(1)
        threading.Thread(target=watch, daemon=True).start()
        sys.argv = ["server", *{args!r}]
        runpy.run_module({module!r}, run_name="__main__")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.stdout.strip() == "installed", done.stderr[-2000:]
