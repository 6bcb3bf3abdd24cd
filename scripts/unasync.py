#!/usr/bin/env python3
"""Generate the sync command API from the async one (httpcore's approach).

    scripts/unasync.py          rewrite every <package>/_X_sync.py from its _X_async.py
    scripts/unasync.py --check  exit 1 if one is out of date (run by the test suite)

Only the command-method layer is generated; the transports are shared (jobwire/_transport.py)
and stay thin because every protocol rule is in the Sans-IO core. ``AsyncFoo`` names become
``Foo``; the generated file says at its top that it is generated.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIRS = [
    (src, src.with_name(src.name[: -len("_async.py")] + "_sync.py"))
    for src in sorted(ROOT.glob("*/_*_async.py"))
]

SUBS = [
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\baclose\b", "close"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__anext__\b", "__next__"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    # A blocking send has nothing to leave for later: the sync side just flushes.
    (r"if not (\w+)\.flush_nowait\(\):\n\s+\1\.flush\(\)", r"\1.flush()"),
]


def convert(source: str, name: str = "_api_async.py") -> str:
    for pattern, replacement in SUBS:
        source = re.sub(pattern, replacement, source)
    return f"# GENERATED from {name} by scripts/unasync.py: do not edit.\n" + source


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for src, dst in PAIRS:
        text = convert(src.read_text(), src.name)
        if dst.exists() and dst.read_text() == text:
            continue
        if check:
            stale.append(dst)
        else:
            dst.write_text(text)
            print(f"wrote {dst.relative_to(ROOT)}")
    for path in stale:
        print(f"{path.relative_to(ROOT)} is out of date: run scripts/unasync.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
